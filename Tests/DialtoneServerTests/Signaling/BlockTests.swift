import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer
@testable import DialtoneStorage

/// `/v1/blocks` with real sockets: a blocked caller's invite rings none of the blocker's
/// devices, looks to the caller like a call nobody answers, and stays out of the blocker's
/// history; unblocking rings again.
@Suite(.serialized) struct BlockTests {
  @Test func aBlockedCallerRingsNoDeviceAndSeesAnUnansweredCall() async throws {
    let server = try await TestServer()
    let bobToken = server.token("bob")
    #expect(try await server.http("PUT", "/v1/blocks/alice", token: bobToken).status == 204)
    #expect(try await server.http("PUT", "/v1/blocks/alice", token: bobToken).status == 204)
    let listed = try await server.http("GET", "/v1/blocks", token: bobToken)
    #expect(listed.json?["blocks"]?.arrayValue?.compactMap { $0["userId"]?.stringValue } == ["alice"])
    #expect(
      try await server.http("GET", "/v1/blocks", token: server.token("alice")).json?["blocks"]?.arrayValue?.count == 0)

    let alice = try await server.connect("alice")
    let phone = try await server.connect("bob")
    let tablet = try await server.connect("bob", device: "tablet")
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    #expect(try await alice.candidateFor(call, 1).isAck)
    try await phone.expectQuiet()
    try await tablet.expectQuiet()
    #expect(try await phone.act(.accept(.init(callId: call, answer: nil))).errorCode == .notFound)

    server.clock.advance(by: 46)
    let ended = try await alice.expect(.callEnded)
    if case .callEnded(let m) = ended { #expect(m.reason == .missed) }
    try await phone.expectQuiet()

    let aliceHistory = try await server.http("GET", "/v1/calls", token: server.token("alice"))
    #expect(aliceHistory.json?["calls"]?.arrayValue?.first?["endReason"]?.stringValue == "missed")
    let bobHistory = try await server.http("GET", "/v1/calls", token: bobToken)
    #expect(bobHistory.json?["calls"]?.arrayValue?.count == 0)
    #expect(try await server.http("GET", "/v1/calls/\(call)", token: bobToken).status == 404)
    #expect(try await server.http("GET", "/v1/calls/\(call)", token: server.token("alice")).status == 200)

    // Unblocked: the next call rings both devices.
    #expect(try await server.http("DELETE", "/v1/blocks/alice", token: bobToken).status == 204)
    #expect(try await server.http("DELETE", "/v1/blocks/alice", token: bobToken).status == 204)
    let again = callID()
    #expect(try await alice.invite(again, to: "bob").isAck)
    _ = try await phone.expect(.invite)
    _ = try await tablet.expect(.invite)
    await server.stop()
  }

  /// A group call from someone a member blocks: that member's devices hear nothing of it, the
  /// others see them as a member who did not answer, and it stays out of their history.
  @Test func aGroupCallFromABlockedCreatorSkipsTheBlocker() async throws {
    let server = try await TestServer(configure: Self.withSFU)
    #expect(try await server.http("PUT", "/v1/blocks/alice", token: server.token("bob")).status == 204)
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let carol = try await server.connect("carol")
    #expect(try await alice.request(.groupCreate(.init(callId: "g-blocked", members: ["bob", "carol"]))).isAck)
    _ = try await carol.expect(.groupInvite)
    #expect(try await bob.request(.getGroup(.init(callId: "g-blocked"))).errorCode == .notFound)
    #expect(try await bob.request(.groupJoin(.init(callId: "g-blocked"))).errorCode == .notFound)
    #expect(try await carol.request(.groupJoin(.init(callId: "g-blocked"))).isAck)
    try await Self.drain(carol)
    try await Self.waitForRingTimers(server, 1)  // Bob's: Carol's stopped when she joined
    server.clock.advance(by: 46)
    guard case .groupUpdate(let update) = try await carol.expect(.groupUpdate) else { return }
    #expect(update.group.members.first { $0.userId == "bob" }?.state == .missed)
    #expect(try await carol.request(.groupLeave(.init(callId: "g-blocked"))).isAck)
    try await Self.drain(alice)
    #expect(try await alice.request(.groupLeave(.init(callId: "g-blocked"))).isAck)
    try await bob.expectQuiet()

    let carolHistory = try await server.http("GET", "/v1/group-calls", token: server.token("carol")).json
    let record = carolHistory?["calls"]?.arrayValue?.first
    #expect(record?["callId"]?.stringValue == "g-blocked")
    #expect(record?["blocked"] == nil)
    let bobHistory = try await server.http("GET", "/v1/group-calls", token: server.token("bob")).json
    #expect(bobHistory?["calls"]?.arrayValue?.count == 0)
    await server.stop()
  }

  /// `--blocked-calls-in-history show`: the blocker's history lists what their block silenced,
  /// marked `blocked`; the blocked caller's records look as before.
  @Test func blockedCallsCanBeKeptInTheBlockersHistory() async throws {
    let server = try await TestServer(configure: {
      Self.withSFU(&$0)
      $0.blockedCallsInHistory = .show
    })
    let bobToken = server.token("bob")
    #expect(try await server.http("PUT", "/v1/blocks/alice", token: bobToken).status == 204)
    let alice = try await server.connect("alice")
    let phone = try await server.connect("bob")
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    #expect(try await alice.request(.groupCreate(.init(callId: "g-kept", members: ["bob"]))).isAck)
    try await Self.waitForRingTimers(server, 2)
    server.clock.advance(by: 46)
    try await Self.drain(alice, until: .groupEnded)
    try await phone.expectQuiet()

    let bobCalls = try await server.http("GET", "/v1/calls", token: bobToken).json?["calls"]?.arrayValue
    #expect(bobCalls?.first?["callId"]?.stringValue == call)
    #expect(bobCalls?.first?["blocked"]?.boolValue == true)
    let detail = try await server.http("GET", "/v1/calls/\(call)", token: bobToken)
    #expect(detail.status == 200 && detail.json?["call"]?["blocked"]?.boolValue == true)
    let aliceCalls = try await server.http("GET", "/v1/calls", token: server.token("alice")).json?["calls"]?.arrayValue
    #expect(aliceCalls?.first?["callId"]?.stringValue == call && aliceCalls?.first?["blocked"] == nil)
    let aliceDetail = try await server.http("GET", "/v1/calls/\(call)", token: server.token("alice"))
    #expect(aliceDetail.json?["call"]?["blocked"] == nil)

    let bobGroups = try await server.http("GET", "/v1/group-calls", token: bobToken).json?["calls"]?.arrayValue
    #expect(bobGroups?.first?["callId"]?.stringValue == "g-kept")
    #expect(bobGroups?.first?["blocked"]?.boolValue == true)
    let aliceGroups = try await server.http("GET", "/v1/group-calls", token: server.token("alice")).json?["calls"]?
      .arrayValue
    #expect(aliceGroups?.first?["endReason"]?.stringValue == "unanswered" && aliceGroups?.first?["blocked"] == nil)
    await server.stop()
  }

  /// Until `count` timers are due in 45 s (the ring timeouts): the hub schedules them as it
  /// applies a request's effects, which may come after the answer was sent.
  private static func waitForRingTimers(_ server: TestServer, _ count: Int) async throws {
    for _ in 0..<1000 {
      let now = server.clock.elapsedSeconds
      let due = server.clock.pendingDeadlines.filter { abs($0 - now - 45) < 0.001 }.count
      if due >= count { return }
      try await Task.sleep(for: .milliseconds(5))
    }
    throw ProbeFailure(description: "fewer than \(count) ring timers were scheduled")
  }

  /// Reads what is queued for the probe: up to a message of type `until` (when given), then up to
  /// the answer of a ping, so that the next request's answer is the next message.
  private static func drain(_ probe: SignalingProbe, until type: ServerMessageType? = nil) async throws {
    if let type {
      var seen = 0
      while try await probe.next(type.rawValue).message.knownType != type {
        seen += 1
        guard seen < 50 else { throw ProbeFailure(description: "no \(type.rawValue) in 50 messages") }
      }
    }
    let id = "drain-\(UUID().uuidString)"
    probe.send(ClientEnvelope(id: id, message: .ping(.init())))
    for _ in 0..<50 where try await probe.next("drain").message.replyTo == id { return }
    throw ProbeFailure(description: "the ping's answer did not come in 50 messages")
  }

  /// LiveKit stands in for the SFU: the server only needs one configured to take group calls.
  private static func withSFU(_ c: inout ServerConfiguration) {
    c.liveKitURL = "ws://127.0.0.1:9"
    c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
    c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
  }

  /// The limit is checked and the block added in one step: requests at once cannot pass it.
  @Test func concurrentBlocksStopAtTheLimit() async throws {
    let store = try SQLiteStore(path: NSTemporaryDirectory() + "dialtone-blocks-\(UUID().uuidString).sqlite")
    let results = await withTaskGroup(of: BlockResult?.self) { group in
      for n in 0..<20 {
        group.addTask { try? await store.block("user\(n)", by: "bob", at: Int64(n), limit: 5) }
      }
      return await group.reduce(into: [BlockResult?]()) { $0.append($1) }
    }
    #expect(results.count { $0 == .added } == 5)
    #expect(results.count { $0 == .limitReached } == 15)
    #expect(try await store.blocks(of: "bob").count == 5)
    let kept = try await store.blocks(of: "bob")[0].userId
    #expect(try await store.block(kept, by: "bob", at: 99, limit: 5) == .alreadyBlocked)
  }

  @Test func blocksAreCheckedBoundedAndKeptAcrossARestart() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-test-\(UUID().uuidString)"
    let first = try await TestServer(configure: { $0.limits.maxBlocksPerUser = 2 }, dataDirectory: directory)
    let bob = first.token("bob")
    #expect(try await first.http("PUT", "/v1/blocks/bob", token: bob).status == 409)
    #expect(try await first.http("DELETE", "/v1/blocks/bob", token: bob).status == 204)
    #expect(try await first.http("PUT", "/v1/blocks/alice").status == 401)
    #expect(try await first.http("PUT", "/v1/blocks/" + String(repeating: "x", count: 129), token: bob).status == 400)
    #expect(try await first.http("PUT", "/v1/blocks/alice", token: bob).status == 204)
    #expect(try await first.http("PUT", "/v1/blocks/carol", token: bob).status == 204)
    #expect(try await first.http("PUT", "/v1/blocks/dave", token: bob).status == 429)
    #expect(try await first.http("PUT", "/v1/blocks/alice", token: bob).status == 204)
    await first.server.stop()
    await first.client.shutdown()

    let second = try await TestServer(dataDirectory: directory)
    let alice = try await second.connect("alice")
    let phone = try await second.connect("bob")
    #expect(try await alice.invite(callID(), to: "bob").isAck)
    try await phone.expectQuiet()
    await second.stop()
  }
}
