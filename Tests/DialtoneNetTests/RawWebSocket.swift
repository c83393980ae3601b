import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A peer that completes the WebSocket handshake and then goes silent: it never answers pings,
/// like a phone that lost its network without closing the socket.
struct RawWebSocket {
  let fd: Int32

  static func handshake(port: Int) throws -> RawWebSocket {
    guard let fd = connectLoopback(port: port) else { throw TimeoutError(what: "raw connect") }
    let request =
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = recv(fd, &buffer, buffer.count, 0)
    guard count > 0, String(decoding: buffer.prefix(count), as: UTF8.self).contains("101") else {
      throw TimeoutError(what: "upgrade response")
    }
    return RawWebSocket(fd: fd)
  }

  func close() { Glibc.close(fd) }
}
