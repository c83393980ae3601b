import DialtoneCalls
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneStorage

/// Live group calls in the shared journal (cluster mode, PostgreSQL): their state round trips
/// for the node that takes them over, and once one does, whatever the node that ran the call
/// before still writes of it is refused, like a 1:1 call's.
@Suite(.scratchPostgres) struct GroupCallFencingTests {
  private func state(_ callId: CallID, bob: GroupMemberState) -> GroupCallSnapshot {
    var alice = GroupCallSnapshot.Member(userId: "alice", state: .joined)
    alice.deviceId = "phone"
    alice.joinedAt = 1000
    alice.firstJoinedAt = 1000
    alice.multistream = true
    var member = GroupCallSnapshot.Member(userId: "bob", state: bob)
    member.ringDeadline = 46_000
    return GroupCallSnapshot(
      callId: callId, createdAt: 1000, creator: Peer(userId: "alice", deviceId: "phone", name: "Alice"),
      members: [alice, member], phase: .ringing, room: nil, silenced: [], title: "Standup", video: false)
  }

  private func record(_ callId: CallID, _ reason: GroupEndReason) -> GroupCallRecord {
    GroupCallRecord(
      callId: callId, creatorId: "alice", title: "Standup", video: false, createdAt: 1000, endedAt: 9000,
      endReason: reason,
      participants: [
        GroupParticipantRecord(userId: "alice", outcome: .left, deviceId: "phone", joinedAt: 1000, durationMs: 8000),
        GroupParticipantRecord(userId: "bob", outcome: .missed),
      ])
  }

  @Test func theStateRoundTripsAndTheFormerOwnersWritesAreRefusedOnceTakenOver() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let formerOwner = try await PostgresLiveCallStore.open(url: url)
    let newOwner = try await PostgresLiveCallStore.open(url: url)
    let store = try await PostgresStore.open(url: url)
    let call: CallID = "group-fenced-1"

    let ringing = state(call, bob: .ringing)
    #expect(
      try formerOwner.write(
        [.groupLive(record(call, .serverRestart), silenced: [], state: ringing)], fencedBy: [:]
      ).isEmpty)
    #expect(try newOwner.liveGroupCalls() == [StoredGroupCall(snapshot: ringing, epoch: 1)])

    // Another node takes it over: epoch 2, the state as written.
    #expect(try newOwner.takeOverGroupCalls([call, "no-such-call"]) == [StoredGroupCall(snapshot: ringing, epoch: 2)])
    let missed = state(call, bob: .missed)
    #expect(
      try newOwner.write([.groupLive(record(call, .serverRestart), silenced: [], state: missed)], fencedBy: [call: 2])
        .isEmpty)

    // The former owner wakes up: its live state and its end are both refused.
    #expect(
      try formerOwner.write([.groupLive(record(call, .serverRestart), silenced: [], state: ringing)], fencedBy: [:])
        == [call])
    #expect(try formerOwner.write([.groupEnded(record(call, .unanswered))], fencedBy: [call: 1]) == [call])
    #expect(try newOwner.liveGroupCalls().map(\.snapshot) == [missed])
    #expect(try await store.groupHistory(of: "alice", limit: 10, before: nil).isEmpty)

    // The new owner ends it; a late write of the former owner does not bring it back.
    #expect(try newOwner.write([.groupEnded(record(call, .completed))], fencedBy: [call: 2]).isEmpty)
    #expect(
      try formerOwner.write([.groupLive(record(call, .serverRestart), silenced: [], state: ringing)], fencedBy: [:])
        == [call])
    #expect(try newOwner.liveGroupCalls().isEmpty)
    #expect(try await store.groupHistory(of: "alice", limit: 10, before: nil).map(\.endReason) == [.completed])
  }

  /// One server on PostgreSQL (no cluster) writes unfenced and still completes its group calls
  /// at start, as before (`completeInterruptedGroupCalls`): group calls do not outlive its restart.
  @Test func oneServerOnPostgreSQLStillCompletesItsGroupCallsAtStart() async throws {
    let url = try SharedPostgres.server().freshSchema()
    let live = try await PostgresLiveCallStore.open(url: url)
    let store = try await PostgresStore.open(url: url)
    try live.write([.groupLive(record("g", .serverRestart), silenced: [], state: state("g", bob: .ringing))])
    #expect(try live.completeInterruptedGroupCalls() == 1)
    #expect(try live.liveGroupCalls().isEmpty)
    #expect(try await store.groupHistory(of: "alice", limit: 10, before: nil).map(\.endReason) == [.serverRestart])
  }
}
