import Foundation

/// A parsed JSON value.
///
/// The protocol codec parses every frame into a `JSONValue` with its own strict parser
/// (`JSONValue.parse`), then reads typed fields from it, which is what lets every decoding
/// error name the exact field at fault. Numbers without a fraction or exponent that fit in
/// `Int64` become `.int`; all other numbers become `.double`.
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case int(Int64)
  case double(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

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

  /// The value as an exact integer: `.int`, or a `.double` holding an integral value in range.
  public var integerValue: Int64? {
    switch self {
    case .int(let value):
      return value
    case .double(let value):
      guard value.rounded(.towardZero) == value,
            value >= -9_223_372_036_854_775_808.0, value < 9_223_372_036_854_775_808.0
      else { return nil }
      return Int64(value)
    default:
      return nil
    }
  }

  public var stringValue: String? {
    if case .string(let value) = self { return value }
    return nil
  }

  public var boolValue: Bool? {
    if case .bool(let value) = self { return value }
    return nil
  }

  public var objectValue: [String: JSONValue]? {
    if case .object(let value) = self { return value }
    return nil
  }

  public var arrayValue: [JSONValue]? {
    if case .array(let value) = self { return value }
    return nil
  }

  public subscript(key: String) -> JSONValue? {
    objectValue?[key]
  }

  // MARK: Parsing and serialisation

  /// Parses one JSON document (RFC 8259) from UTF-8 bytes: strict grammar, UTF-8 validated,
  /// duplicate keys rejected, nesting limited to `JSONValue.maxDepth`.
  public static func parse(_ bytes: some Collection<UInt8>) throws(JSONSyntaxError) -> JSONValue {
    let result: Result<JSONValue, JSONSyntaxError>? = bytes.withContiguousStorageIfAvailable { buffer in
      var parser = JSONParser(buffer)
      do throws(JSONSyntaxError) { return .success(try parser.parseDocument()) } catch { return .failure(error) }
    }
    if let result { return try result.get() }
    let copy = Array(bytes)
    return try copy.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) -> JSONValue in
      var parser = JSONParser(buffer)
      return try parser.parseDocument()
    }
  }

  /// Parses one JSON document from `Data`.
  public static func parse(_ data: Data) throws(JSONSyntaxError) -> JSONValue {
    let result: Result<JSONValue, JSONSyntaxError> = data.withUnsafeBytes { raw in
      let buffer = raw.bindMemory(to: UInt8.self)
      var parser = JSONParser(buffer)
      do throws(JSONSyntaxError) { return .success(try parser.parseDocument()) } catch { return .failure(error) }
    }
    return try result.get()
  }

  /// Compact UTF-8 serialisation with object keys sorted byte-wise, no insignificant
  /// whitespace and no escaping of `/`. Non-finite doubles are written as `null`.
  public var serialized: [UInt8] {
    var writer = JSONWriter()
    writer.write(self)
    return writer.bytes
  }

  /// `serialized` as a `String`.
  public var serializedString: String {
    String(decoding: serialized, as: UTF8.self)
  }

  /// Maximum nesting depth of arrays/objects accepted by `parse`.
  public static let maxDepth = 32
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

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
  ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
  public init(stringLiteral value: String) { self = .string(value) }
  public init(integerLiteral value: Int64) { self = .int(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
  public init(floatLiteral value: Double) { self = .double(value) }
  public init(nilLiteral: ()) { self = .null }
  public init(dictionaryLiteral elements: (String, JSONValue)...) {
    var object: [String: JSONValue] = [:]
    for (key, value) in elements { object[key] = value }
    self = .object(object)
  }
}

extension JSONValue: Codable {
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
