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
  /// signaling client's welcome timeout relies on it to reconnect.
  @Test(.timeLimit(.minutes(1))) func closingAnAttemptThatGotNoAnswerEndsItAtOnce() async throws {
    let held = Locked<[Int32]>([])
    let listener = try Listener(host: "127.0.0.1", port: 0) { sockets in held.withLock { $0 += sockets } }
    defer {
      listener.stop()
      for socket in held.current { close(socket) }
    }
    let client = try WebSocketClient()
    let (events, sink) = AsyncStream<WebSocketClientEvent>.makeStream()
    let connection = try client.connect(to: "ws://127.0.0.1:\(listener.port)/v1/ws") { sink.yield($0) }
    for _ in 0..<500 where held.current.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
    #expect(!held.current.isEmpty)
    connection.close(code: 1001)
    let deadline = ContinuousClock.now + .seconds(8)
    var ended = false
    for await event in events {
      switch event {
      case .failed, .closed: ended = true
      default: continue
      }
      break
    }
    #expect(ended && ContinuousClock.now < deadline, "the abandoned attempt did not end in time")
    await client.shutdown()
  }
}
