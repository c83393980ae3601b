import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneNet

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ClientAbandonTests {
  /// A connection whose server never answers the upgrade (one that went away mid-handshake, or
  /// a half-started one) ends when the client closes it, not after lws's own 20 s or more: the
  /// signaling client's welcome timeout relies on it to reconnect. lws's own timeout is set
  /// longer than the test may run, so the end the test waits for can only be close()'s; the time
  /// limit only catches a close that does nothing.
  @Test(.timeLimit(.minutes(1))) func closingAnAttemptThatGotNoAnswerEndsItAtOnce() async throws {
    let held = Locked<[Int32]>([])
    let listener = try Listener(host: "127.0.0.1", port: 0) { sockets in held.withLock { $0 += sockets } }
    defer {
      listener.stop()
      for socket in held.current { close(socket) }
    }
    let client = try WebSocketClient(
      maxMessageBytes: 1 << 20, pingIntervalSeconds: 25, idleTimeoutSeconds: 75, keepaliveSweepSeconds: 5,
      lwsTimeoutSeconds: 3600)
    let (events, sink) = AsyncStream<WebSocketClientEvent>.makeStream()
    let connection = try client.connect(to: "ws://127.0.0.1:\(listener.port)/v1/ws") { sink.yield($0) }
    // The listener has the connection: the attempt now waits for an upgrade answer that never comes.
    while held.current.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
    connection.close(code: 1001)
    var ended = false
    for await event in events {
      switch event {
      case .failed, .closed: ended = true
      default: continue
      }
      break
    }
    #expect(ended, "the events stopped without the attempt ending")
    await client.shutdown()
  }
}
