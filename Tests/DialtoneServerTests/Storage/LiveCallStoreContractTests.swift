import DialtoneCalls
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

extension StoreContractTests {
  /// The journal's side, on both backends: what it writes is what a restarted server reads.
  @Suite struct LiveCalls {
    private func snapshot(_ callId: CallID, phase: LiveCallSnapshot.Phase = .ringing, at createdAt: Int64 = 1000)
      -> LiveCallSnapshot
    {
      LiveCallSnapshot(
        callId: callId, caller: Identity(userId: "alice", deviceId: "phone", name: "Alice"), calleeId: "bob",
        video: true, createdAt: createdAt, phase: phase, answeredBy: phase == .accepted ? "laptop" : nil,
        answeredAt: phase == .accepted ? 2000 : nil, ringDeadline: 46_000, callerGraceDeadline: 5000,
        answererGraceDeadline: nil,
        invite: .invite(
          .init(
            callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: true,
            offer: SessionDescription(sdp: "v=0\r\noffer\r\n"), createdAt: createdAt)),
        accept: phase == .accepted
          ? .accept(.init(callId: callId, from: Peer(userId: "bob", deviceId: "laptop"), answer: .init(sdp: "v=0 a")))
          : nil)
    }

    private func ended(_ callId: CallID, endedAt: Int64) -> CallRecord {
      CallRecord(
        callId: callId, callerId: "alice", calleeId: "bob", answeredBy: nil, video: true, createdAt: 1000,
        answeredAt: nil, endedAt: endedAt, endReason: .cancelled, durationMs: nil)
    }

    private func group(_ id: CallID, _ reason: GroupEndReason) -> GroupCallRecord {
      GroupCallRecord(
        callId: id, creatorId: "alice", video: false, createdAt: 1, endedAt: 5, endReason: reason,
        participants: [
          GroupParticipantRecord(userId: "alice", outcome: .left, deviceId: "phone", joinedAt: 1, durationMs: 4),
          GroupParticipantRecord(userId: "bob", outcome: .missed),
        ])
    }

    @Test(arguments: StoreBackend.allCases) func whatIsWrittenIsWhatAReopenedStoreReads(_ backend: StoreBackend)
      async throws
    {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let signal = ServerMessage.candidate(
        .init(
          callId: "c1", from: Peer(userId: "alice", deviceId: "phone"),
          candidate: IceCandidate(
            candidate: "candidate:1 1 udp 1 10.0.0.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)
        ))
      let second = ServerMessage.candidate(
        .init(
          callId: "c1", from: Peer(userId: "alice", deviceId: "phone"),
          candidate: IceCandidate(
            candidate: "candidate:2 1 udp 1 10.0.0.2 5000 typ host", sdpMid: "0", sdpMLineIndex: 0)
        ))
      var blockedSnapshot = snapshot("c4", at: 500)
      blockedSnapshot.blocked = true
      do {
        let store = try await rig.liveCalls()
        try store.write([.put(snapshot("c1")), .signal("c1", signal), .put(snapshot("c2")), .signal("c2", signal)])
        try store.write([.signal("c1", second), .put(snapshot("c2", phase: .accepted)), .put(snapshot("c3"))])
        try store.write([.ended(ended("c3", endedAt: 9000), callerDevice: "phone"), .put(blockedSnapshot)])
        try store.write([.ended(ended("c5", endedAt: 9500), callerDevice: "tablet", blocked: true)])
        try store.write([.ended(ended("c6", endedAt: 100), callerDevice: "phone")])
      }
      let reopened = try await rig.liveCalls()
      let live = try reopened.liveCalls()
      // By creation, then id.
      #expect(live.map(\.snapshot.callId) == ["c4", "c1", "c2"])
      #expect(live.first?.snapshot.blocked == true)
      #expect(live[1] == StoredLiveCall(snapshot: snapshot("c1"), callerSignals: [signal, second]))
      // Accepted: no caller signals are held any more.
      #expect(live[2] == StoredLiveCall(snapshot: snapshot("c2", phase: .accepted), callerSignals: []))
      #expect(
        try reopened.callsEnded(since: 9000) == [
          RecentlyEndedCall(record: ended("c3", endedAt: 9000), callerDevice: "phone"),
          RecentlyEndedCall(record: ended("c5", endedAt: 9500), callerDevice: "tablet", blocked: true),
        ])
      #expect(try reopened.callsEnded(since: 9600).isEmpty)
      #expect(try reopened.callsEnded(since: 0).map(\.record.callId) == ["c3", "c5", "c6"])

      // A record is never overwritten by another call with its id.
      try reopened.write([.ended(CallStoreContract.declined("c3"), callerDevice: "phone")])
      let history = try await rig.store()
      #expect(
        try await history.history(of: "alice", limit: 10, before: nil).map(\.endReason) == [
          .cancelled, .cancelled, .cancelled,
        ])
    }

    @Test(arguments: StoreBackend.allCases) func everyKindOfCallIdCountsAsUsed(_ backend: StoreBackend) async throws {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let store = try await rig.liveCalls()
      try store.write([.put(snapshot("live")), .ended(ended("ended", endedAt: 2), callerDevice: "phone")])
      try store.write([.groupEnded(group("group", .completed)), .groupLive(group("group-live", .serverRestart))])
      for id in ["live", "ended", "group", "group-live"] { #expect(try await store.isCallIdUsed(id), "\(id)") }
      #expect(try await !store.isCallIdUsed("fresh"))
    }

    @Test(arguments: StoreBackend.allCases) func aGroupCallLeftLiveIsRecordedOnce(_ backend: StoreBackend) async throws
    {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let store = try await rig.liveCalls()
      try store.write([
        .groupLive(group("g1", .serverRestart), silenced: ["bob"]), .groupLive(group("g2", .serverRestart)),
      ])
      // Replaced by its later state.
      try store.write([.groupLive(group("g1", .serverRestart), silenced: ["bob"])])
      try store.write([.groupEnded(group("g2", .completed))])
      let reopened = try await rig.liveCalls()
      #expect(try reopened.completeInterruptedGroupCalls() == 1)
      #expect(try reopened.completeInterruptedGroupCalls() == 0)
      #expect(try await !reopened.isCallIdUsed("g0"))
      #expect(try await reopened.isCallIdUsed("g1"))
      let history = try await rig.store()
      let alice = try await history.groupHistory(of: "alice", limit: 10, before: nil)
      #expect(Set(alice.map { "\($0.callId) \($0.endReason.rawValue)" }) == ["g1 server-restart", "g2 completed"])
      // The silenced member's block is kept through the restart.
      #expect(try await history.groupHistory(of: "bob", limit: 10, before: nil).map(\.callId) == ["g2"])
    }
  }
}

private enum CallStoreContract {
  static func declined(_ callId: CallID) -> CallRecord {
    CallRecord(
      callId: callId, callerId: "alice", calleeId: "bob", answeredBy: nil, video: true, createdAt: 1000,
      answeredAt: nil, endedAt: 9999, endReason: .declined, durationMs: nil)
  }
}
