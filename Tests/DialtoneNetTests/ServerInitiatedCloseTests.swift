import DialtoneNet
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Answers the first `answers` messages of a socket and closes it with 4429 at the next one, as
/// the signaling hub does with a socket that keeps sending through its refusals
/// (`SignalingHub.refuseTooFast`).
private final class RateLimitingHandler: WebSocketHandler, Sendable {
  let answers: Int
  private let counts = Locked<[UInt64: Int]>([:])
  private let delivered = Locked(0)

  init(answers: Int) { self.answers = answers }

  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    delivered.withLock { $0 += 1 }
    let n = counts.withLock {
      $0[connection.id, default: 0] += 1
      return $0[connection.id, default: 0]
    }
    if n <= answers {
      connection.send(text: "answer \(n)")
    } else if n == answers + 1 {
      connection.close(code: 4429, reason: "kept sending over 10 messages/s")
    }
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
  /// Messages handed to the handler (none may arrive after its close).
  var deliveredCount: Int { delivered.withLock { $0 } }
}

/// A close the server starts must reach a client that is still sending: the server half-closes
/// and reads (discarding) until the client's close frame, end-of-stream or 2 s, instead of
/// closing with the client's data unread, which the kernel answers with a reset that destroys
/// the close frame and every answer queued before it (issue 35).
@Suite(.serialized) struct ServerInitiatedCloseTests {
  /// 20,000 messages sent in a stream, none read while they go: the server answers 300, closes
  /// with 4429 at the 301st while the rest keeps coming, and the client still reads all 300
  /// answers and the close frame. (Before, the server closed with the rest unread and the
  /// kernel reset the connection: the client lost the close frame and most answers.)
  @Test func aFloodingClientThatDoesNotReadGetsTheAnswersAndThe4429CloseFrame() async throws {
    let handler = RateLimitingHandler(answers: 300)
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: Router(), webSocketHandler: handler)
    let port = server.port
    let frames = try await blockingIO { () throws -> [RawWebSocket.Frame] in
      let socket = try RawWebSocket.handshake(port: port)
      defer { socket.close() }
      // Batches of 100 frames, one write each; an error (the reset) ends the flood early.
      flood: for batch in 0..<200 {
        var bytes: [UInt8] = []
        for n in 1...100 { bytes += RawWebSocket.frame(opcode: 0x1, payload: Array("message \(batch * 100 + n)".utf8)) }
        var offset = 0
        while offset < bytes.count {
          let sent = bytes[offset...].withUnsafeBytes { send(socket.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
          if sent <= 0 { break flood }
          offset += sent
        }
      }
      let frames = socket.readFrames(seconds: 5, limit: 400)
      // The client answers the close, as RFC 6455 §5.5.1 asks.
      socket.write(RawWebSocket.frame(opcode: 0x8, payload: RawWebSocket.closePayload(4429)))
      return frames
    }
    await server.stop()
    let texts = frames.filter { $0.opcode == 0x1 }.map { String(decoding: $0.payload, as: UTF8.self) }
    #expect(texts == (1...300).map { "answer \($0)" }, "got \(texts.count) answers")
    #expect(frames.last?.closeCode == 4429, "got \(frames.suffix(2))")
    #expect(handler.deliveredCount == 301, "messages after the close must not be delivered")
  }

  /// The handler's close: the frame leaves after what was queued before it, and the connection
  /// ends once the client has answered (the server does not cut the client off mid-close).
  @Test func theClientsCloseAnswerEndsTheConnection() async throws {
    let handler = RateLimitingHandler(answers: 1)
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: Router(), webSocketHandler: handler)
    let port = server.port
    let (frames, ended) = try await blockingIO { () throws -> ([RawWebSocket.Frame], Bool) in
      let socket = try RawWebSocket.handshake(port: port)
      defer { socket.close() }
      socket.write(RawWebSocket.frame(opcode: 0x1, payload: Array("one".utf8)))
      socket.write(RawWebSocket.frame(opcode: 0x1, payload: Array("two".utf8)))
      let frames = socket.readFrames(seconds: 5, limit: 4)
      socket.write(RawWebSocket.frame(opcode: 0x8, payload: RawWebSocket.closePayload(4429)))
      var byte: UInt8 = 0
      let count = recv(socket.fd, &byte, 1, 0)
      return (frames, count == 0)
    }
    await server.stop()
    #expect(frames.map(\.opcode) == [0x1, 0x8])
    #expect(frames.last?.closeCode == 4429)
    #expect(ended, "the server ends the stream after its close frame")
  }
}
