import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A TCP socket listening on 127.0.0.1 that never accepts: the kernel completes handshakes, then
/// nothing ever answers. Closing it frees the port, which is how tests find free ports.
public final class LoopbackListener {
  public let port: Int
  private let descriptor: Int32

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  /// On `port`, or on one the kernel picks (0).
  public init(port requested: Int = 0) throws {
    (descriptor, port) = try Self.listeningSocket(port: requested)
  }

  /// A socket listening on 127.0.0.1 (`port`, or one the kernel picks), with the port it got: the
  /// caller owns the descriptor (for servers that accept on it themselves).
  public static func listeningSocket(port requested: Int = 0) throws -> (descriptor: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
    var address = loopbackAddress(port: requested)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard bound else {
      close(fd)
      throw Failure(description: "cannot listen on 127.0.0.1: errno \(errno)")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
  }

  deinit { close(descriptor) }

  /// A port nothing listens on right now (another process could take it before it is used).
  public static func freePort() throws -> Int { try LoopbackListener().port }
}
