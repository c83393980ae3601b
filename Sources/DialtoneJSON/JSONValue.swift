/// A parsed JSON value, as a plain `Sendable` value that can cross actors and be inspected
/// without `Any`.
///
/// Integers and fractions stay apart: numbers without a fraction or exponent that fit in
/// `Int64` parse as `.int`, so protocol sequence numbers and JWT NumericDates round-trip
/// exactly; all other numbers parse as `.double`.
///
/// `JSONValue` is deliberately not `ExpressibleByNilLiteral`: with it, `cond ? value : nil`
/// in a function returning `JSONValue?` would silently produce `.some(.null)` instead of
/// `nil`. Write `.null` for a JSON null.
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case int(Int64)
  case double(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])
}

// MARK: - Accessors

extension JSONValue {
  /// The JSON type name used in error messages ("string", "object", ...).
  public var typeName: String {
    switch self {
    case .null: return "null"
    case .bool: return "boolean"
    case .int, .double: return "number"
    case .string: return "string"
    case .array: return "array"
    case .object: return "object"
    }
  }

  public var boolValue: Bool? {
    if case .bool(let value) = self { return value }
    return nil
  }

  /// The value as an exact integer: `.int`, or a `.double` holding an integral value in
  /// range (some encoders write `1.0`).
  public var integerValue: Int64? {
    switch self {
    case .int(let value): return value
    case .double(let value): return Int64(exactly: value)
    default: return nil
    }
  }

  /// `integerValue` as an `Int`, when it fits.
  public var intValue: Int? {
    switch self {
    case .int(let value): return Int(exactly: value)
    case .double(let value): return Int(exactly: value)
    default: return nil
    }
  }

  /// Any number as a `Double` (integers beyond 2^53 are rounded).
  public var doubleValue: Double? {
    switch self {
    case .int(let value): return Double(value)
    case .double(let value): return value
    default: return nil
    }
  }

  public var stringValue: String? {
    if case .string(let value) = self { return value }
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

  /// The member `key` of an object; nil for a missing key or a value that is not an object.
  public subscript(key: String) -> JSONValue? {
    objectValue?[key]
  }
}

// MARK: - Parsing

extension JSONValue {
  /// The nesting limit `parse` and `init?(parsing:)` apply unless given another.
  /// Callers with a tighter contract pass their own (the signaling protocol uses 32).
  public static let defaultMaxDepth = 64

  /// Parses one JSON document (RFC 8259) from UTF-8 bytes, strictly: no trailing commas,
  /// comments, leading zeros, NaN/Infinity, byte order mark or raw control characters in
  /// strings; well-formed UTF-8 only; no lone surrogate escapes; no duplicate object keys
  /// (RFC 7515 §5.2 wants those refused); no number that overflows a finite `Double`; at
  /// most `maxDepth` levels of array/object nesting (so deeply nested input cannot exhaust
  /// the stack); nothing but whitespace after the value.
  ///
  /// Any byte collection works (`[UInt8]`, `ArraySlice<UInt8>`, `Data`, `String.UTF8View`);
  /// contiguous ones are parsed in place without copying.
  public static func parse(
    _ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth
  ) throws(JSONSyntaxError) -> JSONValue {
    try JSONTape.parse(bytes, maxDepth: maxDepth, syntaxError: unchanged) {
      (tape: JSONTape) throws(JSONSyntaxError) -> JSONValue in tape.value(tape.root)
    }
  }

  private static func unchanged(_ error: JSONSyntaxError) -> JSONSyntaxError { error }

  /// `parse(_:maxDepth:)` for callers that only need to know whether the input was valid;
  /// nil wherever `parse` would throw.
  public init?(parsing bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) {
    guard let value = try? Self.parse(bytes, maxDepth: maxDepth) else { return nil }
    self = value
  }
}

/// A JSON syntax error: what was wrong and the byte offset where it was found.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
  public var message: String
  public var offset: Int

  public init(message: String, offset: Int) {
    self.message = message
    self.offset = offset
  }

  public var description: String { "\(message) at byte \(offset)" }
}

// MARK: - Serialisation

extension JSONValue {
  /// Compact UTF-8 JSON: object keys sorted byte-wise (so equal values always give equal
  /// bytes, e.g. for signing), no insignificant whitespace, no escaping of `/` or non-ASCII.
  /// JSON cannot express NaN or infinity: such doubles are written as `null` (check
  /// `containsNonFiniteNumber` first where that must be an error).
  public var serialized: [UInt8] {
    var writer = JSONWriter()
    writer.write(self)
    return writer.bytes
  }

  /// `serialized` as a `String`.
  public var serializedString: String {
    String(decoding: serialized, as: UTF8.self)
  }

  /// Whether a NaN or infinite `.double` occurs anywhere in the value, i.e. whether
  /// `serialized` would have to replace a number with `null`.
  public var containsNonFiniteNumber: Bool {
    switch self {
    case .null, .bool, .int, .string: return false
    case .double(let value): return !value.isFinite
    case .array(let elements): return elements.contains { $0.containsNonFiniteNumber }
    case .object(let members): return members.values.contains { $0.containsNonFiniteNumber }
    }
  }
}

// MARK: - Literals

extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
  ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(integerLiteral value: Int64) { self = .int(value) }
  public init(floatLiteral value: Double) { self = .double(value) }
  public init(stringLiteral value: String) { self = .string(value) }
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    // Later duplicates win, as a plain dictionary assignment would.
    self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
  }
}

// MARK: - Codable

extension JSONValue: Codable {
  /// Codable offers no way to ask a value's kind, so each kind is tried in turn. Prefer
  /// `parse` for JSON text: it is much faster and stricter.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let value = try? container.decode(Bool.self) {
      self = .bool(value)
    } else if let value = try? container.decode(Int64.self) {
      self = .int(value)
    } else if let value = try? container.decode(Double.self) {
      self = .double(value)
    } else if let value = try? container.decode(String.self) {
      self = .string(value)
    } else if let value = try? container.decode([JSONValue].self) {
      self = .array(value)
    } else {
      self = .object(try container.decode([String: JSONValue].self))
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
