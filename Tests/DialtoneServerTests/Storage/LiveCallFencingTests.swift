import DialtoneCalls
import DialtonePostgres
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneStorage

/// Writes fenced by the owner's epoch (cluster mode, PostgreSQL): once a node takes a call over,
/// whatever the node that ran it before still writes is refused, and an ended call never comes
/// back.
@Suite(.scratchPostgres) struct LiveCallFencingTests {
  private func snapshot(_ callId: CallID, phase: LiveCallSnapshot.Phase) -> LiveCallSnapshot {
    LiveCallSnapshot(
      callId: callId, caller: Identity(userId: "alice", deviceId: "phone", name: "Alice"), calleeId: "bob",
      video: false, createdAt: 1000, phase: phase, answeredBy: phase == .accepted ? "laptop" : nil,
      answeredAt: phase == .accepted ? 2000 : nil, ringDeadline: 46_000, callerGraceDeadline: nil,
      answererGraceDeadline: nil,
      invite: .invite(
        .init(
          callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: false,
          offer: SessionDescription(sdp: "v=0\r\n"), createdAt: 1000)),
      accept: nil)
  }

  private func record(_ callId: CallID, _ reason: EndReason) -> CallRecord {
    CallRecord(
      callId: callId, callerId: "alice", calleeId: "bob", answeredBy: reason == .hangup ? "laptop" : nil, video: false,
      createdAt: 1000, answeredAt: reason == .hangup ? 2000 : nil, endedAt: 9000, endReason: reason,
      durationMs: reason == .hangup ? 7000 : nil)
  }

  @Test func theFormerOwnersWritesAreRefusedOnceTheCallIsTakenOver() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let formerOwner = try await PostgresLiveCallStore.open(url: url)
    let newOwner = try await PostgresLiveCallStore.open(url: url)
    let store = try await PostgresStore.open(url: url)
    let call: CallID = "fenced-1"

    // Placed on the first node (epoch 1), ringing.
    #expect(try formerOwner.write([.put(snapshot(call, phase: .ringing))], fencedBy: [:]).isEmpty)
    // The second node takes it over: epoch 2.
    let taken = try newOwner.takeOver([call])
    #expect(taken.map(\.epoch) == [2])
    #expect(try newOwner.write([.put(snapshot(call, phase: .accepted))], fencedBy: [call: 2]).isEmpty)

    // The first node wakes up and writes what it decided before: each change is refused.
    #expect(try formerOwner.write([.put(snapshot(call, phase: .ringing))], fencedBy: [call: 1]) == [call])
    let signal = ServerMessage.candidate(
      .init(callId: call, from: Peer(userId: "alice", deviceId: "phone"), candidate: IceCandidate(candidate: "c")))
    #expect(try formerOwner.write([.signal(call, signal)], fencedBy: [call: 1]) == [call])
    #expect(
      try formerOwner.write([.ended(record(call, .missed), callerDevice: "phone")], fencedBy: [call: 1]) == [call])
    let live = try newOwner.liveCalls()
    #expect(live.map(\.snapshot.phase) == [.accepted] && live.map(\.epoch) == [2])
    #expect(try await store.history(of: "bob", limit: 10, before: nil).isEmpty)

    // The new owner ends it; a late write of the former owner does not bring it back.
    #expect(try newOwner.write([.ended(record(call, .hangup), callerDevice: "phone")], fencedBy: [call: 2]).isEmpty)
    #expect(try formerOwner.write([.put(snapshot(call, phase: .ringing))], fencedBy: [call: 1]) == [call])
    #expect(try newOwner.liveCalls().isEmpty)
    #expect(try await store.history(of: "bob", limit: 10, before: nil).map(\.endReason) == [.hangup])
  }

  /// A batch holds several calls: only the fenced call's changes are refused.
  @Test func aRefusedCallDoesNotHoldUpTheOthersInItsBatch() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let former = try await PostgresLiveCallStore.open(url: url)
    let other = try await PostgresLiveCallStore.open(url: url)
    try former.write([.put(snapshot("a", phase: .ringing)), .put(snapshot("b", phase: .ringing))])
    _ = try other.takeOver(["a"])
    let refused = try former.write(
      [.put(snapshot("a", phase: .accepted)), .put(snapshot("b", phase: .accepted))], fencedBy: [:])
    #expect(refused == ["a"])
    let phases = Dictionary(uniqueKeysWithValues: try other.liveCalls().map { ($0.snapshot.callId, $0.snapshot.phase) })
    #expect(phases == ["a": .ringing, "b": .accepted])
  }

  /// Unfenced writes (one server on PostgreSQL, no cluster) are not checked at all.
  @Test func oneServerOnPostgreSQLWritesUnfenced() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let live = try await PostgresLiveCallStore.open(url: url)
    try live.write([.put(snapshot("c", phase: .ringing))])
    try live.write([.put(snapshot("c", phase: .accepted))])
    #expect(try live.liveCalls().map(\.snapshot.phase) == [.accepted])
  }

  /// A batch is one transaction in two flights (the fence checks, then the writes): a call ended
  /// earlier in the batch refuses the batch's later changes of it, as a check made after the end
  /// would, and the call stays ended.
  @Test func aCallEndedEarlierInTheBatchRefusesItsLaterChanges() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let live = try await PostgresLiveCallStore.open(url: url)
    let store = try await PostgresStore.open(url: url)
    #expect(try live.write([.put(snapshot("e", phase: .accepted))], fencedBy: ["e": 1]).isEmpty)
    let refused = try live.write(
      [.ended(record("e", .hangup), callerDevice: "phone"), .put(snapshot("e", phase: .accepted))],
      fencedBy: ["e": 1])
    #expect(refused == ["e"])
    #expect(try live.liveCalls().isEmpty)
    #expect(try await store.history(of: "bob", limit: 10, before: nil).map(\.endReason) == [.hangup])
  }

  /// A statement that fails in the middle of a batch's writes: the error is reported, nothing of
  /// the batch is kept (no call's writes, before or after it), and the store writes again after.
  @Test func aStatementErrorMidBatchRollsBackTheWholeBatch() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let live = try await PostgresLiveCallStore.open(url: url)
    let admin = try PostgresConnection(url: url)
    try admin.execute(
      """
      CREATE FUNCTION refuse_signal() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'P0001'; END $$;
      CREATE TRIGGER refuse_signal BEFORE INSERT ON live_call_signals FOR EACH ROW EXECUTE FUNCTION refuse_signal();
      """)
    let signal = ServerMessage.candidate(
      .init(callId: "m", from: Peer(userId: "alice", deviceId: "phone"), candidate: IceCandidate(candidate: "c")))
    let batch: [LiveCallChange] = [
      .put(snapshot("m", phase: .ringing)), .signal("m", signal), .put(snapshot("n", phase: .ringing)),
    ]
    for fence in [["m": 1, "n": 1], nil] as [[CallID: Int64]?] {
      do {
        if let fence { _ = try live.write(batch, fencedBy: fence) } else { try live.write(batch) }
        Issue.record("the failed statement was not reported")
      } catch {
        #expect((error as? PostgresError)?.sqlState == "P0001")
      }
      #expect(try live.liveCalls().isEmpty)
    }
    try admin.execute("DROP TRIGGER refuse_signal ON live_call_signals")
    #expect(try live.write(batch, fencedBy: ["m": 1, "n": 1]).isEmpty)
    #expect(try live.liveCalls().map(\.snapshot.callId) == ["m", "n"])
  }
}
