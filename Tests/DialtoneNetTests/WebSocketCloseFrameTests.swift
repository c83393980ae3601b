import DialtoneNet
import DialtoneTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Close frames a client may not send (RFC 6455 §5.5.1), over a raw socket.
@Suite(.serialized) struct WebSocketCloseFrameTests {
  /// A close payload of one byte is neither empty nor a status code: the server answers with a
  /// close frame carrying 1002 (protocol error), not an echo of the byte.
  @Test func aOneByteClosePayloadIsAnsweredWith1002() async throws {
    let server = try startServer(EchoHandler())
    let port = server.port
    let (reply, count) = try await blockingIO { () throws -> ([UInt8], Int) in
      let socket = try RawWebSocket.handshake(port: port)
      defer { socket.close() }
      var timeout = timeval(tv_sec: 5, tv_usec: 0)
      _ = setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
      // FIN + close, masked, payload length 1: the byte 0x03, masked with 01 02 03 04.
      let frame: [UInt8] = [0x88, 0x81, 0x01, 0x02, 0x03, 0x04, 0x03 ^ 0x01]
      _ = frame.withUnsafeBytes { send(socket.fd, $0.baseAddress, $0.count, 0) }
      var reply = [UInt8](repeating: 0, count: 64)
      let count = recv(socket.fd, &reply, reply.count, 0)
      return (reply, count)
    }
    await server.stop()
    try #require(count >= 4, "expected a close frame, got \(count) bytes")
    #expect(reply[0] == 0x88)
    #expect(reply[1] & 0x7f >= 2)
    #expect(UInt16(reply[2]) << 8 | UInt16(reply[3]) == 1002)
  }
}
