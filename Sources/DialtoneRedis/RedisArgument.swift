/// One command argument, as raw bytes: it is sent with its length (`RedisCommandFormat`), so any
/// byte, CRLF included, stays part of the value and never becomes protocol.
public struct RedisArgument: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
  public let bytes: [UInt8]

  public init(bytes: [UInt8]) { self.bytes = bytes }
  public init(_ string: String) { bytes = Array(string.utf8) }
  public init(_ integer: Int64) { bytes = Array(String(integer).utf8) }
  public init(stringLiteral value: String) { self.init(value) }
  public init(integerLiteral value: Int64) { self.init(value) }

  public static func bytes(_ bytes: [UInt8]) -> RedisArgument { RedisArgument(bytes: bytes) }
  public static func string(_ string: String) -> RedisArgument { RedisArgument(string) }
  public static func integer(_ integer: Int64) -> RedisArgument { RedisArgument(integer) }
}

extension RedisArgument {
  /// A duration as whole milliseconds (rounded up, as PX, PEXPIRE and BLOCK take them).
  public static func milliseconds(_ duration: Duration) throws(RedisError) -> RedisArgument {
    .integer(try RedisConnection.milliseconds(duration))
  }
}
