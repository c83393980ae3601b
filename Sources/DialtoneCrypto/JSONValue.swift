import Foundation

/// A JSON document as a plain Sendable value, so claims can cross actors and be
/// inspected without `Any`. Integers and fractions stay apart because JWT
/// NumericDates are usually integers and must round-trip exactly.
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case int(Int)
  case double(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])
}

extension JSONValue {
  public var stringValue: String? {
    if case .string(let value) = self { return value }
    return nil
  }

  /// Also accepts integral fractions such as `1.0`, which some encoders emit.
  public var intValue: Int? {
    switch self {
    case .int(let value): return value
    case .double(let value): return Int(exactly: value)
    default: return nil
    }
  }

  public var doubleValue: Double? {
    switch self {
    case .int(let value): return Double(value)
    case .double(let value): return value
    default: return nil
    }
  }

  public var boolValue: Bool? {
    if case .bool(let value) = self { return value }
    return nil
  }

  public var arrayValue: [JSONValue]? {
    if case .array(let value) = self { return value }
    return nil
  }

  public var objectValue: [String: JSONValue]? {
    if case .object(let value) = self { return value }
    return nil
  }

  public subscript(key: String) -> JSONValue? {
    objectValue?[key]
  }

  /// Parses UTF-8 JSON text strictly (see `JSONParser`); nil when it is not valid
  /// JSON or repeats a member name.
  public init?(parsing bytes: [UInt8]) {
    guard let value = JSONParser.parse(bytes) else { return nil }
    self = value
  }

  /// Compact UTF-8 JSON with sorted keys, so equal values always sign to equal bytes.
  /// Throws only for non-finite doubles, which JSON cannot express.
  public func serialized() throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return Array(try encoder.encode(self))
  }

  /// A JWT NumericDate (RFC 7519 §2): whole seconds when the date allows it.
  public static func numericDate(_ date: Date) -> JSONValue {
    let seconds = date.timeIntervalSince1970.rounded(.down)
    if let whole = Int(exactly: seconds) { return .int(whole) }
    return .double(date.timeIntervalSince1970)
  }
}

extension JSONValue: Codable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    // Codable offers no way to ask a value's kind, so each kind is tried in turn,
    // most common first. Bool and Int never steal each other's values.
    if let value = try? container.decode([String: JSONValue].self) {
      self = .object(value)
    } else if let value = try? container.decode(String.self) {
      self = .string(value)
    } else if let value = try? container.decode(Int.self) {
      self = .int(value)
    } else if let value = try? container.decode(Double.self) {
      self = .double(value)
    } else if let value = try? container.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? container.decode([JSONValue].self) {
      self = .array(value)
    } else if container.decodeNil() {
      self = .null
    } else {
      throw DecodingError.dataCorruptedError(in: container, debugDescription: "unsupported JSON value")
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .null: try container.encodeNil()
    case .bool(let value): try container.encode(value)
    case .int(let value): try container.encode(value)
    case .double(let value): try container.encode(value)
    case .string(let value): try container.encode(value)
    case .array(let value): try container.encode(value)
    case .object(let value): try container.encode(value)
    }
  }
}

// Deliberately not ExpressibleByNilLiteral: with it, `cond ? value : nil` in a
// function returning `JSONValue?` silently becomes `.null` instead of `nil`.
extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
  ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
  ExpressibleByDictionaryLiteral
{
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(integerLiteral value: Int) { self = .int(value) }
  public init(floatLiteral value: Double) { self = .double(value) }
  public init(stringLiteral value: String) { self = .string(value) }
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    // Later duplicates win, matching how JSON objects with repeated keys are read.
    self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
  }
}
