/// How strictly to validate while decoding.
import DialtoneJSON

public struct WireDecodingOptions: Sendable, Equatable {
  /// Enforce maximum sizes and character rules (`Limits`). Servers decode client input with
  /// this on; clients decode server output with it off, so a later server that raises a
  /// limit does not break older clients. Types and required fields are always checked.
  public var enforceLimits: Bool

  public init(enforceLimits: Bool) {
    self.enforceLimits = enforceLimits
  }

  /// Full validation (server decoding client input, HTTP request bodies).
  public static let strict = WireDecodingOptions(enforceLimits: true)
  /// Type checks only (client decoding server output).
  public static let lenient = WireDecodingOptions(enforceLimits: false)
}

/// A value with a fixed JSON shape on the wire.
///
/// Conforming types are also `Codable` through their JSON shape, so `JSONEncoder` /
/// `JSONDecoder` produce and accept exactly the wire format.
public protocol WireCodable: Sendable, Equatable, Codable {
  /// Decodes from a JSON value. `path` is the dotted location of `json` inside the message
  /// ("" for the top level); it prefixes field names in error messages.
  init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError)
  /// The JSON shape of this value.
  var json: JSONValue { get }
}

extension WireCodable {
  /// Decodes a top-level JSON value.
  public init(json: JSONValue, options: WireDecodingOptions = .strict) throws(ProtocolError) {
    try self.init(json: json, path: "", options: options)
  }

  /// Decodes from UTF-8 JSON text.
  public init(jsonBytes: some Collection<UInt8>, options: WireDecodingOptions = .strict) throws(ProtocolError) {
    let value: JSONValue
    do {
      value = try JSONValue.parse(jsonBytes, maxDepth: Limits.maxJSONDepth)
    } catch {
      throw ProtocolError(.badRequest, "malformed JSON: \(error)")
    }
    try self.init(json: value, path: "", options: options)
  }

  /// Compact JSON with sorted keys.
  public var jsonBytes: [UInt8] { json.serialized }

  /// Compact JSON with sorted keys, as a string.
  public var jsonString: String { json.serializedString }

  public init(from decoder: any Decoder) throws {
    let value = try JSONValue(from: decoder)
    try self.init(json: value, path: "", options: .strict)
  }

  public func encode(to encoder: any Encoder) throws {
    try json.encode(to: encoder)
  }
}

// MARK: - Field reading (internal)

/// Reads typed fields from a JSON object, producing errors that name the field.
/// A field whose value is `null` counts as absent.
struct FieldReader {
  let object: [String: JSONValue]
  let path: String
  let options: WireDecodingOptions

  init(_ value: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    guard case .object(let object) = value else {
      if path.isEmpty { throw ProtocolError(.badRequest, "expected a JSON object") }
      throw ProtocolError(.badRequest, "\"\(path)\" must be an object")
    }
    self.object = object
    self.path = path
    self.options = options
  }

  var enforceLimits: Bool { options.enforceLimits }

  func name(_ key: String) -> String {
    path.isEmpty ? key : path + "." + key
  }

  func quoted(_ key: String) -> String {
    "\"" + name(key) + "\""
  }

  func value(_ key: String) -> JSONValue? {
    guard let value = object[key] else { return nil }
    if case .null = value { return nil }
    return value
  }

  func missing(_ key: String) -> ProtocolError {
    ProtocolError(.badRequest, "\(quoted(key)) is required")
  }

  func wrongType(_ key: String, _ expected: String) -> ProtocolError {
    ProtocolError(.badRequest, "\(quoted(key)) must be \(expected)")
  }

  // MARK: Strings

  /// A string of `minBytes...maxBytes` UTF-8 bytes. With `tooLarge`, exceeding the maximum is
  /// reported as `too-large: "<field>" exceeds N bytes`; otherwise as `bad-request`.
  func optionalString(
    _ key: String, minBytes: Int = 0, maxBytes: Int? = nil, tooLarge: Bool = false
  ) throws(ProtocolError) -> String? {
    guard let value = value(key) else { return nil }
    guard case .string(let text) = value else { throw wrongType(key, "a string") }
    let count = text.utf8.count
    if count < minBytes {
      throw ProtocolError(.badRequest, "\(quoted(key)) must not be empty")
    }
    if enforceLimits, let maxBytes, count > maxBytes {
      if tooLarge { throw ProtocolError(.tooLarge, "\(quoted(key)) exceeds \(maxBytes) bytes") }
      throw ProtocolError(.badRequest, "\(quoted(key)) must be at most \(maxBytes) bytes")
    }
    return text
  }

  func string(
    _ key: String, minBytes: Int = 1, maxBytes: Int? = nil, tooLarge: Bool = false
  ) throws(ProtocolError) -> String {
    guard let text = try optionalString(key, minBytes: minBytes, maxBytes: maxBytes, tooLarge: tooLarge) else {
      throw missing(key)
    }
    return text
  }

  func callId(_ key: String = "callId") throws(ProtocolError) -> CallID {
    guard let id = try optionalCallId(key) else { throw missing(key) }
    return id
  }

  func optionalCallId(_ key: String) throws(ProtocolError) -> CallID? {
    guard let text = try optionalString(key, minBytes: 1) else { return nil }
    if enforceLimits, let problem = CallIDRules.problem(with: text) {
      throw ProtocolError(.badRequest, "\(quoted(key)) \(problem)")
    }
    return text
  }

  func userId(_ key: String) throws(ProtocolError) -> String {
    try string(key, maxBytes: Limits.maxUserIDBytes)
  }

  func optionalUserId(_ key: String) throws(ProtocolError) -> String? {
    try optionalString(key, minBytes: 1, maxBytes: Limits.maxUserIDBytes)
  }

  func deviceId(_ key: String) throws(ProtocolError) -> String {
    try string(key, maxBytes: Limits.maxDeviceIDBytes)
  }

  func optionalDeviceId(_ key: String) throws(ProtocolError) -> String? {
    try optionalString(key, minBytes: 1, maxBytes: Limits.maxDeviceIDBytes)
  }

  func optionalName(_ key: String) throws(ProtocolError) -> String? {
    try optionalString(key, maxBytes: Limits.maxNameBytes)
  }

  func sdp(_ key: String) throws(ProtocolError) -> String {
    try string(key, maxBytes: Limits.maxSDPBytes, tooLarge: true)
  }

  /// An end reason: strict decoding rejects unknown values, lenient decoding maps them to `failed`.
  func optionalEndReason(_ key: String) throws(ProtocolError) -> EndReason? {
    guard let raw = try optionalString(key, minBytes: 1) else { return nil }
    if let reason = EndReason(rawValue: raw) { return reason }
    if enforceLimits {
      throw ProtocolError(
        .badRequest, "\(quoted(key)) must be one of \(EndReason.allCases.map(\.rawValue).joined(separator: ", "))")
    }
    return .failed
  }

  func endReason(_ key: String) throws(ProtocolError) -> EndReason {
    guard let reason = try optionalEndReason(key) else { throw missing(key) }
    return reason
  }

  // MARK: Booleans and numbers

  func optionalBool(_ key: String) throws(ProtocolError) -> Bool? {
    guard let value = value(key) else { return nil }
    guard case .bool(let flag) = value else { throw wrongType(key, "a boolean") }
    return flag
  }

  func bool(_ key: String) throws(ProtocolError) -> Bool {
    guard let flag = try optionalBool(key) else { throw missing(key) }
    return flag
  }

  func optionalInt(_ key: String, in range: ClosedRange<Int64>) throws(ProtocolError) -> Int64? {
    guard let value = value(key) else { return nil }
    guard let number = value.integerValue else { throw wrongType(key, "an integer") }
    guard range.contains(number) else {
      if range.upperBound == Int64.max {
        throw wrongType(key, "an integer >= \(range.lowerBound)")
      }
      throw wrongType(key, "an integer from \(range.lowerBound) to \(range.upperBound)")
    }
    return number
  }

  func int(_ key: String, in range: ClosedRange<Int64>) throws(ProtocolError) -> Int64 {
    guard let number = try optionalInt(key, in: range) else { throw missing(key) }
    return number
  }

  /// A millisecond timestamp (ms since the Unix epoch, non-negative).
  func timestamp(_ key: String) throws(ProtocolError) -> Int64 {
    try int(key, in: 0...Int64.max)
  }

  func optionalTimestamp(_ key: String) throws(ProtocolError) -> Int64? {
    try optionalInt(key, in: 0...Int64.max)
  }

  /// A seq value: 0...2^53-1.
  func seq(_ key: String) throws(ProtocolError) -> UInt64 {
    UInt64(try int(key, in: 0...Int64(Limits.maxSeq)))
  }

  func optionalSeq(_ key: String) throws(ProtocolError) -> UInt64? {
    try optionalInt(key, in: 0...Int64(Limits.maxSeq)).map { UInt64($0) }
  }

  // MARK: Nested values

  func optional<T: WireCodable>(_ key: String, _ type: T.Type) throws(ProtocolError) -> T? {
    guard let value = value(key) else { return nil }
    guard case .object = value else { throw wrongType(key, "an object") }
    return try T(json: value, path: name(key), options: options)
  }

  func required<T: WireCodable>(_ key: String, _ type: T.Type) throws(ProtocolError) -> T {
    guard let nested = try optional(key, type) else { throw missing(key) }
    return nested
  }

  func optionalArray<T: WireCodable>(_ key: String, of type: T.Type) throws(ProtocolError) -> [T]? {
    guard let value = value(key) else { return nil }
    guard case .array(let elements) = value else { throw wrongType(key, "an array") }
    var result: [T] = []
    result.reserveCapacity(elements.count)
    for (offset, element) in elements.enumerated() {
      let elementPath = "\(name(key))[\(offset)]"
      guard case .object = element else {
        throw ProtocolError(.badRequest, "\"\(elementPath)\" must be an object")
      }
      result.append(try T(json: element, path: elementPath, options: options))
    }
    return result
  }

  func array<T: WireCodable>(_ key: String, of type: T.Type) throws(ProtocolError) -> [T] {
    guard let result = try optionalArray(key, of: type) else { throw missing(key) }
    return result
  }

  /// An array of strings; with `acceptSingle`, a lone string is accepted as a one-element array.
  func stringArray(_ key: String, acceptSingle: Bool = false, nonEmpty: Bool = false) throws(ProtocolError) -> [String]
  {
    guard let value = value(key) else { throw missing(key) }
    let strings: [String]
    switch value {
    case .string(let single) where acceptSingle:
      strings = [single]
    case .array(let elements):
      var collected: [String] = []
      for (offset, element) in elements.enumerated() {
        guard case .string(let text) = element else {
          throw ProtocolError(.badRequest, "\"\(name(key))[\(offset)]\" must be a string")
        }
        collected.append(text)
      }
      strings = collected
    default:
      throw wrongType(key, acceptSingle ? "an array of strings or a string" : "an array of strings")
    }
    if nonEmpty && strings.isEmpty {
      throw ProtocolError(.badRequest, "\(quoted(key)) must not be empty")
    }
    return strings
  }
}

/// Builds a JSON object, omitting nil optionals.
struct ObjectBuilder {
  /// Sized for a typical message up front, so that building one never rehashes.
  var members = [String: JSONValue](minimumCapacity: 8)

  init() {}

  mutating func set(_ key: String, _ value: String) { members[key] = .string(value) }
  mutating func set(_ key: String, _ value: String?) { if let value { members[key] = .string(value) } }
  mutating func set(_ key: String, _ value: Bool) { members[key] = .bool(value) }
  mutating func set(_ key: String, _ value: Bool?) { if let value { members[key] = .bool(value) } }
  mutating func set(_ key: String, _ value: Int64) { members[key] = .int(value) }
  mutating func set(_ key: String, _ value: Int64?) { if let value { members[key] = .int(value) } }
  mutating func set(_ key: String, _ value: Int) { members[key] = .int(Int64(value)) }
  mutating func set(_ key: String, _ value: UInt64) { members[key] = .int(Int64(clamping: value)) }
  mutating func set(_ key: String, _ value: UInt64?) { if let value { set(key, value) } }
  mutating func set(_ key: String, _ value: (some WireCodable)?) { if let value { members[key] = value.json } }
  mutating func set(_ key: String, _ values: [some WireCodable]) { members[key] = .array(values.map(\.json)) }

  var json: JSONValue { .object(members) }
}
