import DialtoneClient
import DialtoneClientLinux
import DialtoneNet
import DialtoneProtocol
import DialtoneServer
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let secret = "client-test-secret-0123456789"

/// The SDK's signaling client against the real server over loopback.
@Suite(.serialized) struct SignalingClientTests {
  /// The loopback server, and signaling clients for it.
  struct Rig {
    let loopback: LoopbackServer
    var server: DialtoneServer { loopback.server }
    var network: WebSocketClient { loopback.network }

    init() async throws { loopback = try await LoopbackServer(secret: secret) }

    func client(_ user: String, device: String = "phone") -> SignalingClient {
      let loopback = self.loopback
      return SignalingClient(
        configuration: .init(url: loopback.webSocketURL),
        transport: LWSSignalingTransport(client: loopback.network)
      ) {
        try loopback.token(user, device: device)
      }
    }

    func stop() async { await loopback.stop() }
  }

  /// A client's app-level events in order.
  struct Inbox: Sendable {
    private let log: EventLog<SignalingClient.Event>

    init(_ client: SignalingClient) { log = EventLog(client.events) }

    var messages: [ServerMessage] {
      log.compactMap {
        if case .message(let m) = $0 { return m }
        return nil
      }
    }
    var connections: Int {
      log.count {
        if case .connected = $0 { return true }
        return false
      }
    }
    var stopped: Bool {
      log.contains {
        if case .stopped = $0 { return true }
        return false
      }
    }

    func waitFor(_ what: String, _ condition: @escaping @Sendable (Inbox) -> Bool) async throws {
      guard await eventually(within: 15, { condition(self) }) else {
        throw ClientTestFailure(description: "timed out waiting for \(what)")
      }
    }
  }

  struct ClientTestFailure: Error, CustomStringConvertible { let description: String }

  /// Requests refused as `rate-limited` go again after the server's `retryAfterMs`: a burst
  /// over the limit is slowed down, not lost.
  // A transport's idle timeout (URLSession's timeoutIntervalForRequest) outlasts two of the
  // pings a quiet client sends (one per half heartbeat of silence) and the client's own wait for
  // an answer, so it never drops a healthy socket; 15 s against a 12.5 s ping did.
  @Test func theTransportIdleTimeoutOutlastsTwoHeartbeatPings() {
    let configuration = SignalingClient.Configuration(url: "wss://calls.example.com/v1/ws")
    for heartbeat in [ProtocolDefaults.heartbeatSeconds, 60] {
      let ping = Duration.seconds(heartbeat) / 2
      #expect(SignalingClient.transportIdleTimeout(heartbeatSeconds: heartbeat) > ping * 2 + configuration.pingTimeout)
    }
    #expect(SignalingClient.transportIdleTimeout() == .seconds(2 * ProtocolDefaults.heartbeatSeconds))
  }

  @Test func rateLimitedRequestsAreSentAgainAfterTheWait() async throws {
    let loopback = try await LoopbackServer(secret: secret) { $0.limits.messagesPerSecond = 2 }  // bursts of 8
    let client = SignalingClient(
      configuration: .init(url: loopback.webSocketURL), transport: LWSSignalingTransport(client: loopback.network)
    ) { try loopback.token("alice", device: "phone") }
    let inbox = Inbox(client)
    await client.start()
    try await inbox.waitFor("connected") { $0.connections == 1 }
    var replies: [SignalingReply] = []
    for _ in 0..<11 { replies.append(try await client.submit(.ping(.init()))) }
    for reply in replies {
      let answer = try await reply.value
      guard case .ack = answer else {
        Issue.record("a ping was answered \(answer)")
        continue
      }
    }
    await client.stop()
    await loopback.stop()
  }

  @Test func aNetworkChangeMidCallLosesAndDuplicatesNothing() async throws {
    let rig = try await Rig()
    let alice = rig.client("alice")
    let bob = rig.client("bob")
    let aliceInbox = Inbox(alice)
    let bobInbox = Inbox(bob)
    await alice.start()
    await bob.start()
    try await aliceInbox.waitFor("alice connected") { $0.connections == 1 }
    try await bobInbox.waitFor("bob connected") { $0.connections == 1 }

    let call = "call-" + UUID().uuidString
    let invited = try await alice.request(
      .invite(.init(callId: call, to: "bob", video: false, offer: SessionDescription(sdp: "v=0\r\n"))))
    #expect(invited.knownType == .ack)
    try await bobInbox.waitFor("the invite") { $0.messages.contains { $0.knownType == .invite } }
    _ = try await bob.request(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n"))))
    try await aliceInbox.waitFor("the accept") { $0.messages.contains { $0.knownType == .accept } }

    // Alice trickles 20 candidates; halfway, Bob's network switches (his socket is replaced).
    for n in 0..<20 {
      if n == 10 { await bob.networkChanged() }
      let answer = try await alice.request(
        .candidate(
          .init(
            callId: call, candidate: IceCandidate(candidate: "candidate:\(n) 1 udp 1 10.0.0.1 \(5000 + n) typ host"))))
      #expect(answer.knownType == .ack)
    }
    // And Bob sends his while reconnecting: requests wait and go out after the resume.
    for n in 0..<5 {
      _ = try await bob.request(
        .candidate(
          .init(
            callId: call,
            candidate: IceCandidate(candidate: "candidate:\(100 + n) 1 udp 1 10.0.0.2 \(6000 + n) typ host"))))
    }

    try await bobInbox.waitFor("20 candidates") { $0.messages.filter { $0.knownType == .candidate }.count >= 20 }
    try await aliceInbox.waitFor("5 candidates") { $0.messages.filter { $0.knownType == .candidate }.count >= 5 }
    try await Task.sleep(for: .milliseconds(300))
    let received = bobInbox.messages.compactMap { message -> String? in
      if case .candidate(let c) = message { return c.candidate.candidate }
      return nil
    }
    #expect(received == (0..<20).map { "candidate:\($0) 1 udp 1 10.0.0.1 \(5000 + $0) typ host" })
    #expect(bobInbox.connections >= 2)
    #expect(aliceInbox.messages.filter { $0.knownType == .candidate }.count == 5)

    await alice.stop()
    await bob.stop()
    await rig.stop()
  }

  @Test func aRefusedTokenStopsTheClient() async throws {
    let rig = try await Rig()
    let client = SignalingClient(
      configuration: .init(url: "ws://127.0.0.1:\(rig.server.port)/v1/ws"),
      transport: LWSSignalingTransport(client: rig.network)
    ) { "not-a-token" }
    let inbox = Inbox(client)
    await client.start()
    // 4401 is final: the client must not retry with the same token forever.
    try await inbox.waitFor("the stop") { $0.stopped }
    #expect(inbox.connections == 0)
    await rig.stop()
  }

  /// An app's log sink hears the connection's life, the session resumed after a network change,
  /// and each engine's states with its call id; never the token, an SDP or a candidate.
  @Test func theAppsLogHearsTheConnectionAndTheCallsButNoSecrets() async throws {
    let rig = try await Rig()
    let entries = RecentLogEntries()
    let log = Log(level: .debug, subsystem: "", sink: entries)
    let token = try rig.loopback.token("alice", device: "phone")
    let alice = SignalingClient(
      configuration: .init(url: rig.loopback.webSocketURL),
      transport: LWSSignalingTransport(client: rig.network), log: log
    ) { token }
    let bob = rig.client("bob")
    let aliceInbox = Inbox(alice)
    let bobInbox = Inbox(bob)
    await alice.start()
    await bob.start()
    try await aliceInbox.waitFor("alice connected") { $0.connections == 1 }
    try await bobInbox.waitFor("bob connected") { $0.connections == 1 }
    let offer = "v=0\r\no=- 1 1 IN IP4 192.0.2.77\r\n"
    let call = "call-" + UUID().uuidString
    _ = try await alice.request(
      .invite(.init(callId: call, to: "bob", video: false, offer: SessionDescription(sdp: offer))))
    _ = try await alice.request(
      .candidate(
        .init(callId: call, candidate: IceCandidate(candidate: "candidate:1 1 udp 1 192.0.2.77 5000 typ host"))))
    await alice.networkChanged()
    try await aliceInbox.waitFor("alice back") { $0.connections == 2 }

    let said = entries.entries
    #expect(said.contains { $0.component == "signaling" && $0.message.hasPrefix("signed in as alice/phone") })
    #expect(said.contains { $0.component == "signaling" && $0.message == "session resumed" && $0.sessionId != nil })
    #expect(said.contains { $0.component == "signaling" && $0.message.contains("closed") })
    for entry in said {
      #expect(!entry.message.contains(token) && !entry.message.contains("192.0.2.77"), "\(entry.message)")
    }
    await alice.stop()
    await bob.stop()
    await rig.stop()
  }
}
