import DialtoneCrypto

/// A Lua script and its SHA-1, the name EVALSHA knows it by.
public struct RedisScript: Sendable, Hashable {
  public let source: String
  /// Lower-case hex, as SCRIPT LOAD returns it.
  public let sha1: String

  public init(_ source: String) {
    self.source = source
    sha1 = SHA1.hash(Array(source.utf8)).map { byte in
      let text = String(byte, radix: 16)
      return byte < 16 ? "0" + text : text
    }.joined()
  }
}
