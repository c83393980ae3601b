/// A server reply (RESP2: hiredis 0.14 has no RESP3 types). A nil bulk string and a nil array
/// are both `.null`, as hiredis reports them alike.
public indirect enum RedisReply: Sendable, Equatable {
  case status(String)
  /// An error reply; `prefix` is its first word when that is an upper-case code (WRONGTYPE,
  /// NOSCRIPT, ERR...), else empty.
  case error(prefix: String, message: String)
  case integer(Int64)
  case bulk([UInt8])
  case null
  case array([RedisReply])

  /// A bulk or status reply as UTF-8 text (invalid sequences repaired).
  public var string: String? {
    switch self {
    case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
    case .status(let text): text
    default: nil
    }
  }

  public var bytes: [UInt8]? {
    if case .bulk(let bytes) = self { return bytes }
    return nil
  }

  public var integer: Int64? {
    if case .integer(let value) = self { return value }
    return nil
  }

  public var elements: [RedisReply]? {
    if case .array(let elements) = self { return elements }
    return nil
  }

  /// A hash as `HGETALL` answers it (a flat array: field, value, field, value...), in pairs; nil
  /// unless every element is text and they pair up.
  public var fieldsAndValues: [(field: String, value: String)]? {
    guard let flat = elements, flat.count.isMultiple(of: 2) else { return nil }
    var pairs: [(field: String, value: String)] = []
    pairs.reserveCapacity(flat.count / 2)
    for index in stride(from: 0, to: flat.count, by: 2) {
      guard let field = flat[index].string, let value = flat[index + 1].string else { return nil }
      pairs.append((field, value))
    }
    return pairs
  }

  /// The server's error this reply carries, as the `RedisError` a command that got it throws.
  public var failure: RedisError? {
    guard case .error(let prefix, let message) = self else { return nil }
    return .server(prefix: prefix, message: message)
  }

  /// This reply, or the server's error it carries thrown.
  public func checked() throws(RedisError) -> RedisReply {
    if let failure { throw failure }
    return self
  }

  /// Splits "WRONGTYPE Operation against..." into its code and the rest.
  static func serverError(_ text: String) -> RedisReply {
    let word = text.prefix { $0 != " " }
    guard !word.isEmpty, word.allSatisfy({ $0.isUppercase || $0.isNumber || $0 == "_" }) else {
      return .error(prefix: "", message: text)
    }
    return .error(prefix: String(word), message: String(text.dropFirst(word.count).drop { $0 == " " }))
  }
}
