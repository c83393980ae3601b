import DialtoneCalls
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

private let answer = SessionDescription(sdp: "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")

/// A server stopped and started again on the same data directory carries on with its calls:
/// clients that come back are told to resync, find their calls with `get-call`, and go on.
@Suite(.serialized) struct RestartTests {
  private func restarted(_ server: TestServer) async throws -> TestServer {
    await server.server.stop()
    await server.client.shutdown()
    return try await TestServer(dataDirectory: server.dataDirectory)
  }

  /// Alice calls Bob, whose phone rings.
  private func aliceRingsBob(on server: TestServer) async throws -> (SignalingProbe, SignalingProbe, CallID) {
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    _ = try await alice.invite(call, to: "bob")
    _ = try await bob.expect(.invite)
    return (alice, bob, call)
  }

  /// A client of the restarted server resuming its old session: it gets a new one (`resync`).
  private func comeBack(_ user: String, to server: TestServer, from old: SignalingProbe) async throws -> SignalingProbe
  {
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await probe.hello(
      token: server.token(user), resume: .init(sessionId: old.sessionId ?? "", lastSeq: old.lastSeq))
    #expect(welcome.resync && !welcome.resumed)
    return probe
  }

  @Test func anAcceptedCallOutlivesARestartAndEndsOnceInTheHistory() async throws {
    var server = try await TestServer()
    let (alice, bob, call) = try await aliceRingsBob(on: server)
    #expect(try await bob.act(.accept(.init(callId: call, answer: answer))).isAck)
    _ = try await alice.expect(.accept)

    server = try await restarted(server)
    let alice2 = try await comeBack("alice", to: server, from: alice)
    // The accept again, in case the first never reached the caller before the restart.
    guard case .accept(let again) = try await alice2.expect(.accept) else { return }
    #expect(again.answer == answer)
    let state = try await alice2.act(.getCall(.init(callId: call)))
    guard case .ack(let ack) = state else {
      Issue.record("get-call after the restart: \(state)")
      return
    }
    #expect(ack.call?.state == .accepted && ack.call?.calleeDeviceId == "phone")
    let bob2 = try await comeBack("bob", to: server, from: bob)
    server.clock.advance(by: 5)
    #expect(try await bob2.act(.hangup(.init(callId: call))).isAck)
    guard case .callEnded(let ended) = try await alice2.expect(.callEnded) else { return }
    #expect(ended.reason == .hangup)

    let history = try await server.http("GET", "/v1/calls", token: server.token("alice"))
    let records = history.json?["calls"]?.arrayValue ?? []
    #expect(records.count == 1)
    #expect(records.first?["callId"]?.stringValue == call)
    #expect(records.first?["endReason"]?.stringValue == "hangup")
    #expect((records.first?["durationMs"]?.intValue ?? 0) >= 5000)
    await server.stop()
  }

  @Test func aRingingCallRingsOnAfterARestartAndCanBeAnswered() async throws {
    var server = try await TestServer()
    let (alice, bob, call) = try await aliceRingsBob(on: server)
    #expect(try await alice.candidateFor(call, 1).isAck)
    _ = try await bob.expect(.candidate)

    server = try await restarted(server)
    let bob2 = try await comeBack("bob", to: server, from: bob)
    _ = try await bob2.expect(.invite)
    _ = try await bob2.expect(.candidate)
    let alice2 = try await comeBack("alice", to: server, from: alice)
    #expect(try await bob2.act(.accept(.init(callId: call, answer: answer))).isAck)
    _ = try await alice2.expect(.accept)
    await server.stop()
  }

  @Test func aCallThatEndedJustBeforeARestartIsStillKnownAfterIt() async throws {
    var server = try await TestServer()
    let (alice, bob, call) = try await aliceRingsBob(on: server)
    _ = try await bob.act(.accept(.init(callId: call, answer: answer)))
    _ = try await alice.expect(.accept)
    #expect(try await alice.act(.hangup(.init(callId: call))).isAck)

    server = try await restarted(server)
    // Bob missed the call-ended: get-call tells him how it ended.
    let bob2 = try await comeBack("bob", to: server, from: bob)
    guard case .ack(let state) = try await bob2.act(.getCall(.init(callId: call))) else {
      Issue.record("get-call does not know a call that ended just before the restart")
      return
    }
    #expect(state.call?.state == .ended && state.call?.endReason == .hangup)
    await server.stop()
  }

  @Test func aCallIdIsNeverAcceptedTwiceEvenLongAfterItsCallEnded() async throws {
    var server = try await TestServer()
    let (alice, bob, call) = try await aliceRingsBob(on: server)
    _ = try await alice.act(.cancel(.init(callId: call)))
    _ = try await bob.expect(.callEnded)
    // Long gone from memory: only the history remembers it.
    server.clock.advance(by: 3600)
    let carol = try await server.connect("carol")
    guard case .error(let refused) = try await carol.invite(call, to: "bob") else {
      Issue.record("a used call id was accepted again")
      return
    }
    #expect(refused.code == .conflict)
    server = try await restarted(server)
    server.clock.advance(by: 3600)
    let alice2 = try await server.connect("alice")
    guard case .error(let again) = try await alice2.invite(call, to: "bob") else {
      Issue.record("a used call id was accepted again after a restart")
      return
    }
    #expect(again.code == .conflict)
    let history = try await server.http("GET", "/v1/calls", token: server.token("bob"))
    #expect(history.json?["calls"]?.arrayValue?.first?["endReason"]?.stringValue == "cancelled")
    await server.stop()
  }
}

/// A live-call store whose writes wait until the test lets them through.
final class GatedLiveCallStore: LiveCallStore, @unchecked Sendable {
  // @unchecked: `open` is touched only under `condition`.
  private let inner: SQLiteLiveCallStore
  private let condition = NSCondition()
  private var open = false

  init(dataDirectory: String) throws { inner = try SQLiteLiveCallStore.open(dataDirectory: dataDirectory) }

  func letWritesThrough() {
    condition.withLock {
      open = true
      condition.broadcast()
    }
  }

  func write(_ changes: [LiveCallChange]) throws {
    condition.withLock {
      while !open { condition.wait() }
    }
    try inner.write(changes)
  }
  func liveCalls() throws -> [StoredLiveCall] { try inner.liveCalls() }
  func completeInterruptedGroupCalls() throws -> Int { try inner.completeInterruptedGroupCalls() }
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try inner.callsEnded(since: since) }
  func isCallIdUsed(_ callId: CallID) async throws -> Bool { try await inner.isCallIdUsed(callId) }
}

@Suite(.serialized) struct JournalOrderingTests {
  @Test func nobodySeesACallChangeBeforeItIsOnDisk() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-gated-\(UUID().uuidString)"
    let store = try GatedLiveCallStore(dataDirectory: directory)
    let server = try await TestServer(dataDirectory: directory, liveCalls: store)
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    let inviteID = alice.newID()
    alice.send(
      ClientEnvelope(id: inviteID, message: .invite(.init(callId: call, to: "bob", video: false, offer: nil))))
    // The server goes on answering what does not wait for the disk: the invite's ack is not
    // before the ping's, and Bob has not been rung.
    #expect(try await alice.request(.ping(.init())).isAck)
    try await bob.expectQuiet()
    // A retry of the held invite is not answered twice.
    alice.send(
      ClientEnvelope(id: inviteID, message: .invite(.init(callId: call, to: "bob", video: false, offer: nil))))
    #expect(try await alice.request(.ping(.init())).isAck)  // the retry has been read meanwhile
    store.letWritesThrough()
    let acked = try await alice.next("the invite's ack")
    #expect(acked.message.replyTo == inviteID && acked.message.isAck)
    _ = try await bob.expect(.invite)
    try await alice.expectQuiet()
    await server.stop()
  }
}
