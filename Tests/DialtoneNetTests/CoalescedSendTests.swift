import Foundation
import Testing

@testable import DialtoneNet

#if canImport(Glibc)
  import Glibc
#endif

/// "hold:X" sends X coalesced, "now:X" sends X at once, "close" closes with 4000.
private struct CoalescingHandler: WebSocketHandler {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    let text = String(decoding: message, as: UTF8.self)
    if text.hasPrefix("hold:") { connection.sendCoalesced(text: Array(text.utf8.dropFirst(5))) }
    if text.hasPrefix("now:") { connection.send(text: Array(text.utf8.dropFirst(4))) }
    if text == "close" { connection.close(code: 4000, reason: "bye") }
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}

/// Runs `body` against a raw peer of a server with the given coalescing delay.
private func withCoalescingPeer(delay: Double, _ body: (RawWebSocket) throws -> Void) async throws {
  var configuration = WebServerConfiguration(port: 0)
  configuration.coalescingDelay = delay
  let server = try WebServer(configuration: configuration, router: Router(), webSocketHandler: CoalescingHandler())
  let peer = try RawWebSocket.handshake(port: server.port)
  let outcome = Result { try body(peer) }
  peer.close()
  await server.stop()
  try outcome.get()
}

extension RawWebSocket {
  /// Sends one masked text frame, as a client must.
  func sendText(_ text: String) {
    let payload = Array(text.utf8)
    let mask: [UInt8] = [0x11, 0x22, 0x33, 0x44]
    var frame: [UInt8] = [0x81, 0x80 | UInt8(payload.count)] + mask
    frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
  }

  /// Whether bytes arrive within `milliseconds`.
  func readable(within milliseconds: Int32) -> Bool {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    var ready = poll(&descriptor, 1, milliseconds)
    // A signal (the test runner's, the runtime's) interrupts poll: that is not silence.
    while ready < 0 && errno == EINTR { ready = poll(&descriptor, 1, milliseconds) }
    return ready > 0
  }

  /// One `recv` (after waiting up to 10 s for data), split into (opcode, payload) frames.
  func receiveFrames() -> [(opcode: UInt8, payload: String)] {
    guard readable(within: 10_000) else { return [] }
    var buffer = [UInt8](repeating: 0, count: 4096)
    var count = recv(fd, &buffer, buffer.count, 0)
    while count < 0 && errno == EINTR { count = recv(fd, &buffer, buffer.count, 0) }
    var frames: [(UInt8, String)] = []
    var index = 0
    while count > 0, index + 2 <= count {
      let length = Int(buffer[index + 1] & 0x7f)  // the tests' payloads are short
      let start = index + 2
      guard start + length <= count else { break }
      frames.append((buffer[index] & 0x0f, String(decoding: buffer[start..<start + length], as: UTF8.self)))
      index = start + length
    }
    return frames
  }
}

@Suite(.serialized) struct CoalescedSendTests {
  @Test func aHeldMessageLeavesWithTheNextOneInOneWrite() async throws {
    try await withCoalescingPeer(delay: 30) { peer in
      peer.sendText("hold:first")
      #expect(!peer.readable(within: 300), "a coalesced message must wait for company")
      peer.sendText("now:second")
      // Both frames come out of one recv: they were written together, in order.
      let frames = peer.receiveFrames()
      #expect(frames.map(\.payload) == ["first", "second"])
      #expect(frames.map(\.opcode) == [1, 1])
    }
  }

  /// Several messages held (the first, a short one and a 200-byte one with a longer header),
  /// then one sent at once: all in one write, in the order sent.
  @Test func severalHeldMessagesLeaveWithTheNextOneInOneWrite() async throws {
    let long = String(repeating: "z", count: 110)
    try await withCoalescingPeer(delay: 30) { peer in
      peer.sendText("hold:one")
      peer.sendText("hold:two")
      peer.sendText("hold:\(long)")
      #expect(!peer.readable(within: 300), "coalesced messages must wait for company")
      peer.sendText("now:last")
      let frames = peer.receiveFrames()
      #expect(frames.map(\.payload) == ["one", "two", long, "last"])
      #expect(frames.map(\.opcode) == [1, 1, 1, 1])
    }
  }

  @Test func aHeldMessageLeavesAloneWhenTheDelayEnds() async throws {
    try await withCoalescingPeer(delay: 0.05) { peer in
      peer.sendText("hold:lonely")
      #expect(peer.receiveFrames().map(\.payload) == ["lonely"])
    }
  }

  /// The loop's timer is armed for the oldest held message; when that one left early with
  /// another, the timer expires with nothing due and must wait again for the next one held.
  @Test func aMessageHeldAfterAnEarlierOneLeftStillLeavesAlone() async throws {
    try await withCoalescingPeer(delay: 0.2) { peer in
      peer.sendText("hold:early")
      peer.sendText("now:company")
      var frames = peer.receiveFrames()
      if frames.count < 2 { frames += peer.receiveFrames() }
      #expect(frames.map(\.payload) == ["early", "company"])
      peer.sendText("hold:later")
      #expect(peer.receiveFrames().map(\.payload) == ["later"])
      peer.sendText("hold:again")
      #expect(peer.receiveFrames().map(\.payload) == ["again"])
    }
  }

  /// The timer's expiry is consumed by its re-arming or disarming, not by a read: were it left
  /// readable, the loop would be woken by the same expiry again and again.
  @Test func eachArmingOfTheCoalescingTimerExpiresOnce() async throws {
    let executor = NetworkExecutor()
    var configuration = WebServerConfiguration(port: 0)
    configuration.coalescingDelay = 0.05
    let server = try WebServer(
      configuration: configuration, router: Router(), webSocketHandler: CoalescingHandler(), executor: executor)
    let peer = try RawWebSocket.handshake(port: server.port)
    peer.sendText("hold:one")
    let first = peer.receiveFrames().map(\.payload)
    peer.sendText("hold:two")
    let second = peer.receiveFrames().map(\.payload)
    let expiries = await NetworkThread(executor).timerExpiries()
    peer.close()
    await server.stop()
    #expect(first == ["one"] && second == ["two"])
    #expect(expiries?.coalescing == 2)
  }

  @Test func closingWritesHeldMessagesBeforeTheCloseFrame() async throws {
    try await withCoalescingPeer(delay: 30) { peer in
      peer.sendText("hold:last words")
      #expect(!peer.readable(within: 200))
      peer.sendText("close")
      var frames: [(opcode: UInt8, payload: String)] = []
      while frames.count < 2 {
        let more = peer.receiveFrames()
        if more.isEmpty { break }
        frames += more
      }
      #expect(frames.first?.opcode == 1 && frames.first?.payload == "last words")
      #expect(frames.dropFirst().first?.opcode == 8)
    }
  }

  @Test func withoutADelayCoalescedMessagesLeaveAtOnce() async throws {
    try await withCoalescingPeer(delay: 0) { peer in
      peer.sendText("hold:now")
      #expect(peer.receiveFrames().map(\.payload) == ["now"])
    }
  }
}

/// Reads the loop's state on its own thread, as it must be.
private actor NetworkThread {
  nonisolated let executor: NetworkExecutor
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  init(_ executor: NetworkExecutor) { self.executor = executor }
  func timerExpiries() -> (timers: Int, coalescing: Int)? { executor.loopTimerExpiries }
}
