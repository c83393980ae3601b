import DialtoneJSON
import Foundation

/// The claims object of a JWT (RFC 7519 §4), read through typed accessors and
/// built the same way for signing.
public struct JWTClaims: Sendable, Hashable {
  public var object: [String: JSONValue]

  public init(_ object: [String: JSONValue] = [:]) {
    self.object = object
  }

  public init(
    subject: String? = nil, issuer: String? = nil, audience: String? = nil,
    issuedAt: Date? = nil, notBefore: Date? = nil, expiresAt: Date? = nil,
    extra: [String: JSONValue] = [:]
  ) {
    self.object = extra
    self.subject = subject
    self.issuer = issuer
    if let audience { object["aud"] = .string(audience) }
    self.issuedAt = issuedAt
    self.notBefore = notBefore
    self.expiresAt = expiresAt
  }

  public var json: JSONValue { .object(object) }

  public subscript(key: String) -> JSONValue? {
    get { object[key] }
    set { object[key] = newValue }
  }

  public var subject: String? {
    get { string("sub") }
    set { object["sub"] = newValue.map(JSONValue.string) }
  }

  public var issuer: String? {
    get { string("iss") }
    set { object["iss"] = newValue.map(JSONValue.string) }
  }

  /// `aud` may be one string or an array of strings (RFC 7519 §4.1.3).
  public var audience: [String] {
    switch object["aud"] {
    case .string(let value)?: return [value]
    case .array(let values)?: return values.compactMap(\.stringValue)
    default: return []
    }
  }

  public var jwtID: String? { string("jti") }

  public var expiresAt: Date? {
    get { date("exp") }
    set { object["exp"] = newValue.map(JSONValue.numericDate) }
  }

  public var notBefore: Date? {
    get { date("nbf") }
    set { object["nbf"] = newValue.map(JSONValue.numericDate) }
  }

  public var issuedAt: Date? {
    get { date("iat") }
    set { object["iat"] = newValue.map(JSONValue.numericDate) }
  }

  public func string(_ key: String) -> String? { object[key]?.stringValue }
  public func int(_ key: String) -> Int? { object[key]?.intValue }
  public func double(_ key: String) -> Double? { object[key]?.doubleValue }
  public func bool(_ key: String) -> Bool? { object[key]?.boolValue }

  /// A NumericDate claim: seconds since the epoch, integral or not.
  public func date(_ key: String) -> Date? {
    guard let seconds = object[key]?.doubleValue, seconds.isFinite else { return nil }
    return Date(timeIntervalSince1970: seconds)
  }
}

extension JSONValue {
  /// A JWT NumericDate (RFC 7519 §2): whole seconds when the date allows it.
  public static func numericDate(_ date: Date) -> JSONValue {
    let seconds = date.timeIntervalSince1970.rounded(.down)
    if let whole = Int64(exactly: seconds) { return .int(whole) }
    return .double(date.timeIntervalSince1970)
  }
}

extension JWTClaims: ExpressibleByDictionaryLiteral {
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
  }
}
