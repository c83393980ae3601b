import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// A transport whose sockets close at once (no server): counts how often it is asked.
private final class RefusingTransport: SignalingTransport, Sendable {
  let opens = Locked(0)

  func open(url: String, bearerToken: String?) -> any SignalingSocket {
    opens.withLock { $0 += 1 }
    return DeadSocket()
  }
}

@Suite struct SignalingBackoffTests {
  // The reconnect backoff runs on the injected clock: nothing reconnects until virtual time
  // passes the (jittered, ±50 %) delay.
  @Test func reconnectsWaitForTheClock() async throws {
    let clock = ManualClock()
    let transport = RefusingTransport()
    var configuration = SignalingClient.Configuration(url: "ws://127.0.0.1:9/v1/ws")
    configuration.backoff = [.seconds(10)]
    configuration.welcomeTimeout = .seconds(1000)
    let client = SignalingClient(configuration: configuration, transport: transport, clock: clock) { "token" }
    await client.start()
    // The socket's keepalive (half the 25 s heartbeat) and its welcome timeout sleep on the
    // clock too until the socket closes: wait until only the backoff is left.
    try #require(
      await eventually {
        clock.pendingCount == 1 && clock.pendingDeadlines.allSatisfy { $0 != 12.5 && $0 != 1000 }
      })
    let wait = try #require(clock.pendingDeadlines.first)
    #expect(wait >= 5 && wait <= 15)
    #expect(transport.opens.current == 1)
    clock.advance(by: wait - 0.5)
    try await Task.sleep(for: .milliseconds(50))
    #expect(transport.opens.current == 1)
    clock.advance(by: 0.5)
    #expect(await eventually { transport.opens.current == 2 })
    await client.stop()
  }
}

/// A transport whose sockets open but never answer (no `welcome`), until closed.
private final class SilentTransport: SignalingTransport, Sendable {
  let opens = Locked(0)
  let closes = Locked(0)

  func open(url: String, bearerToken: String?) -> any SignalingSocket {
    opens.withLock { $0 += 1 }
    return SilentSocket(closes: closes)
  }
}

private struct SilentSocket: SignalingSocket {
  let events: AsyncStream<SignalingSocketEvent>
  let sink: AsyncStream<SignalingSocketEvent>.Continuation
  let closes: Locked<Int>

  init(closes: Locked<Int>) {
    (events, sink) = AsyncStream<SignalingSocketEvent>.makeStream()
    sink.yield(.opened)
    self.closes = closes
  }
  func send(_ text: String) {}
  func close(code: Int) {
    closes.withLock { $0 += 1 }
    sink.yield(.closed(code: nil))
    sink.finish()
  }
}

@Suite struct SignalingWelcomeTimeoutTests {
  // A server that accepts the socket and never welcomes: the client gives up on that socket
  // after `welcomeTimeout` (virtual time) and connects again, instead of waiting forever.
  @Test func noWelcomeClosesTheSocketAndReconnects() async throws {
    let clock = ManualClock()
    let transport = SilentTransport()
    var configuration = SignalingClient.Configuration(url: "ws://127.0.0.1:9/v1/ws")
    configuration.backoff = [.seconds(1)]
    configuration.welcomeTimeout = .seconds(10)
    let client = SignalingClient(configuration: configuration, transport: transport, clock: clock) { "token" }
    await client.start()
    try #require(await eventually { clock.pendingDeadlines.contains(10) })
    clock.advance(by: 9)
    try await Task.sleep(for: .milliseconds(50))
    #expect(transport.closes.current == 0)
    clock.advance(by: 1)
    #expect(await eventually { transport.closes.current == 1 })
    // The jittered 1 s backoff, then the next attempt.
    try #require(await eventually { clock.pendingDeadlines.contains { $0 > 10.4 && $0 <= 11.6 } })
    clock.advance(by: 2)
    #expect(await eventually { transport.opens.current == 2 })
    await client.stop()
  }
}
