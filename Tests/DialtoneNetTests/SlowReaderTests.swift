import DialtoneNet
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// Sends a flood to every socket that opens, as a busy peer's offers would to a callee that
/// never reads.
private final class FloodingHandler: WebSocketHandler, Sendable {
  private struct State: Sendable {
    var closedCodes: [UInt16?] = []
  }
  private let state = Locked(State())
  let messages: Int
  let size: Int

  init(messages: Int, size: Int) {
    self.messages = messages
    self.size = size
  }

  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {
    let payload = [UInt8](repeating: 0x61, count: size)
    for _ in 0..<messages { connection.send(text: payload) }
  }
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {}
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {
    state.withLock { $0.closedCodes.append(code) }
  }
  var closed: Int { state.withLock { $0.closedCodes.count } }
}

@Suite(.serialized) struct SlowReaderTests {
  /// 32 MB sent to a peer that never reads (its receive buffer shrunk to a few KB): the server
  /// holds at most `maxQueuedBytes` of it, then closes the socket rather than growing.
  @Test func aReaderThatNeverReadsIsClosedInsteadOfGrowingTheQueue() async throws {
    let handler = FloodingHandler(messages: 512, size: 64 * 1024)
    var configuration = WebServerConfiguration(port: 0)
    configuration.maxQueuedBytes = 1 << 20
    let server = try WebServer(configuration: configuration, router: Router(), webSocketHandler: handler)
    defer { server.shutdown() }

    let fd = try #require(connectLoopback(port: server.port, receiveBuffer: 4096))
    defer { close(fd) }
    let request =
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    // Never read: the server must give up on this socket by itself.
    try await eventually("the server closes the socket of a reader that never reads") { handler.closed == 1 }
  }

  /// Sockets whose readers keep up are not touched by the limit.
  @Test func aReaderThatKeepsUpGetsEverything() async throws {
    let handler = FloodingHandler(messages: 64, size: 64 * 1024)
    var configuration = WebServerConfiguration(port: 0)
    configuration.maxQueuedBytes = 8 << 20
    let server = try WebServer(configuration: configuration, router: Router(), webSocketHandler: handler)
    defer { server.shutdown() }
    let client = try WebSocketClient()
    let probe = try ClientProbe(client: client, url: "ws://127.0.0.1:\(server.port)/v1/ws")
    var received = 0
    while received < 64 {
      if case .message = try await probe.next("flooded message \(received)") { received += 1 }
    }
    #expect(handler.closed == 0)
    await client.shutdown()
  }
}
