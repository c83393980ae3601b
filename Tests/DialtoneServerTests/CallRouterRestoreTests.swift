import DialtoneCalls
import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneSessions

/// What the router hands the journal, and how it carries on with calls reloaded after a restart:
/// the state machine alone, with virtual time.
struct CallRouterRestoreTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)
  let offer = SessionDescription(sdp: "v=0 offer")
  let answer = SessionDescription(sdp: "v=0 answer")

  private func changes(_ effects: [CallEffect]) -> [LiveCallChange] {
    effects.compactMap {
      if case .persist(let change) = $0 { return change }
      return nil
    }
  }
  private func schedules(_ effects: [CallEffect]) -> [CallTimer: Duration] {
    var timers: [CallTimer: Duration] = [:]
    for case .schedule(let timer, let delay) in effects { timers[timer] = delay }
    return timers
  }
  private func sends(_ effects: [CallEffect], to recipient: Recipient) -> [ServerMessage] {
    effects.compactMap {
      if case .send(let m, recipient) = $0 { return m }
      return nil
    }
  }
  private func record(_ effects: [CallEffect]) -> CallRecord? {
    changes(effects).compactMap {
      if case .ended(let r, _, _) = $0 { return r }
      return nil
    }.first
  }
  private func snapshot(_ effects: [CallEffect]) -> LiveCallSnapshot? {
    changes(effects).compactMap {
      if case .put(let s) = $0 { return s }
      return nil
    }.last
  }

  /// Alice calls Bob with an offer and trickles one candidate; what the journal got, as reloaded.
  private func ringingCall(_ router: inout CallRouter) -> StoredLiveCall? {
    let invited = router.handle(
      .invite(.init(callId: "c1", to: "bob", video: false, offer: offer)), id: "i", from: alice, now: t0)
    let trickled = router.handle(
      .candidate(.init(callId: "c1", candidate: IceCandidate(candidate: "candidate:1", sdpMid: "0", sdpMLineIndex: 0))),
      id: "k", from: alice, now: t0)
    guard let put = snapshot(invited.effects), case .signal("c1", let signal) = changes(trickled.effects).first
    else { return nil }
    return StoredLiveCall(snapshot: put, callerSignals: [signal])
  }

  @Test func everyTransitionThatIsAcknowledgedIsHandedToTheJournal() throws {
    var router = CallRouter()
    let stored = try #require(ringingCall(&router))
    #expect(stored.snapshot.phase == .ringing)
    #expect(stored.snapshot.ringDeadline == t0.addingTimeInterval(45).millisecondsSince1970)
    let accepted = router.handle(.accept(.init(callId: "c1", answer: answer)), id: "a", from: bob, now: t0)
    let put = try #require(snapshot(accepted.effects))
    #expect(put.phase == .accepted && put.answeredBy == "phone")
    guard case .accept(let relayed) = put.accept else {
      Issue.record("the accept is not kept for the caller")
      return
    }
    #expect(relayed.answer == answer)
    let hungUp = router.handle(.hangup(.init(callId: "c1")), id: "h", from: alice, now: t0.addingTimeInterval(9))
    let ended = try #require(record(hungUp.effects))
    #expect(ended.endReason == .hangup && ended.durationMs == 9000)
    // A socket drop is kept too: its grace deadline survives a restart.
    var other = CallRouter()
    _ = ringingCall(&other)
    let dropped = other.deviceDisconnected(alice, now: t0.addingTimeInterval(2))
    #expect(snapshot(dropped)?.callerGraceDeadline == t0.addingTimeInterval(32).millisecondsSince1970)
  }

  @Test func aRestoredRingingCallRingsOnUntilItsDeadlineAndCanBeAnswered() throws {
    var before = CallRouter()
    let stored = try #require(ringingCall(&before))
    var router = CallRouter()
    let restored = router.restore([stored], now: t0.addingTimeInterval(10))
    #expect(schedules(restored)[CallTimer(callId: "c1", kind: .ring)] == .seconds(35))
    #expect(
      schedules(restored)[CallTimer(callId: "c1", kind: .grace(userId: "alice", deviceId: "phone"))] == .seconds(60))
    // Bob's phone comes back with a new session: the invite and the caller's candidate again.
    let back = router.deviceConnected(bob, newSession: true, now: t0.addingTimeInterval(11))
    let resent = sends(back, to: .device(userId: "bob", deviceId: "phone"))
    #expect(resent.map(\.knownType) == [.invite, .candidate])
    let accepted = router.handle(
      .accept(.init(callId: "c1", answer: answer)), id: "a", from: bob, now: t0.addingTimeInterval(12))
    #expect(accepted.reply.isAck)
    #expect(router.callState("c1", visibleTo: alice)?.state == .accepted)
  }

  @Test func aRingingCallWhoseDeadlinePassedWhileDownEndsMissedAtThatDeadline() throws {
    var before = CallRouter()
    let stored = try #require(ringingCall(&before))
    var router = CallRouter()
    let restored = router.restore([stored], now: t0.addingTimeInterval(100))
    let ended = try #require(record(restored))
    #expect(ended.endReason == .missed)
    #expect(ended.endedAt == t0.addingTimeInterval(45).millisecondsSince1970)
    #expect(router.callState("c1", visibleTo: bob)?.state == .ended)
  }

  @Test func aRestoredAcceptedCallWaitsForBothDevicesAndTellsTheCallerItWasAccepted() throws {
    var before = CallRouter()
    _ = ringingCall(&before)
    let accepted = before.handle(.accept(.init(callId: "c1", answer: answer)), id: "a", from: bob, now: t0)
    let put = try #require(snapshot(accepted.effects))
    var router = CallRouter()
    let restored = router.restore([StoredLiveCall(snapshot: put, callerSignals: [])], now: t0.addingTimeInterval(20))
    let timers = schedules(restored)
    #expect(timers[CallTimer(callId: "c1", kind: .grace(userId: "alice", deviceId: "phone"))] == .seconds(60))
    #expect(timers[CallTimer(callId: "c1", kind: .grace(userId: "bob", deviceId: "phone"))] == .seconds(60))
    #expect(timers[CallTimer(callId: "c1", kind: .ring)] == nil)
    // The caller's new session gets the accept, answer included, in case the first one was lost.
    let back = router.deviceConnected(alice, newSession: true, now: t0.addingTimeInterval(21))
    guard case .accept(let again) = sends(back, to: .device(userId: "alice", deviceId: "phone")).first else {
      Issue.record("no accept for the caller's new session")
      return
    }
    #expect(again.answer == answer)
    // Bob never comes back: the call ends as any lost connection does, with the whole duration.
    let lost = router.timerFired(
      CallTimer(callId: "c1", kind: .grace(userId: "bob", deviceId: "phone")), now: t0.addingTimeInterval(80))
    let ended = try #require(record(lost))
    #expect(ended.endReason == .connectionLost && ended.durationMs == 80_000)
  }

  @Test func aGraceThatRanOutWhileDownEndsTheCallAtItsDeadline() throws {
    var before = CallRouter()
    _ = ringingCall(&before)
    _ = before.handle(.accept(.init(callId: "c1", answer: answer)), id: "a", from: bob, now: t0)
    let dropped = before.deviceDisconnected(bob, now: t0.addingTimeInterval(5))
    let put = try #require(snapshot(dropped))
    var router = CallRouter()
    let restored = router.restore([StoredLiveCall(snapshot: put, callerSignals: [])], now: t0.addingTimeInterval(300))
    let ended = try #require(record(restored))
    #expect(ended.endReason == .connectionLost)
    #expect(ended.endedAt == t0.addingTimeInterval(35).millisecondsSince1970)
  }
}

extension CallRouterRestoreTests {
  @Test func callsThatEndedJustBeforeARestartStillAnswerGetCallUntilTheirRetentionEnds() throws {
    let record = CallRecord(
      callId: "c9", callerId: "alice", calleeId: "bob", answeredBy: "phone", video: false,
      createdAt: t0.millisecondsSince1970, answeredAt: t0.millisecondsSince1970,
      endedAt: t0.addingTimeInterval(30).millisecondsSince1970, endReason: .hangup, durationMs: 30_000)
    var router = CallRouter()
    _ = router.restore(
      [], ended: [RecentlyEndedCall(record: record, callerDevice: "phone")], now: t0.addingTimeInterval(40))
    let state = try #require(router.callState("c9", visibleTo: bob))
    #expect(state.state == .ended && state.endReason == .hangup && state.callerDeviceId == "phone")
    #expect(router.callState("c9", visibleTo: Identity(userId: "carol", deviceId: "x", name: nil)) == nil)
    // A hangup retried after the restart is told the call ended, as it would have been before.
    let retried = router.handle(.hangup(.init(callId: "c9")), id: "h", from: alice, now: t0.addingTimeInterval(41))
    guard case .error(let error) = retried.reply else {
      Issue.record("a retried hangup of an ended call was acknowledged")
      return
    }
    #expect(error.code == .invalidState)
    router.pruneEnded(now: t0.addingTimeInterval(30 + 601))
    #expect(router.callState("c9", visibleTo: bob) == nil)
  }
}

struct HeldOutcomesTests {
  @Test func outcomesLeaveInOrderOnceTheirTicketIsWritten() {
    var held = HeldOutcomes<String>()
    held.hold("accept", for: "c1", until: 1)
    // Writes nothing, but must not overtake the accept of its call.
    held.hold("candidate", for: "c1", until: held.pendingTicket(of: "c1") ?? 0)
    held.hold("invite c2", for: "c2", until: 2)
    #expect(held.release(upTo: 0).isEmpty)
    #expect(held.release(upTo: 1) == ["accept", "candidate"])
    #expect(held.pendingTicket(of: "c1") == nil)
    #expect(held.release(upTo: 5) == ["invite c2"])
    #expect(held.isEmpty)
  }

  @Test func aLaterOutcomeOfACallNeverLeavesBeforeAnEarlierOne() {
    var held = HeldOutcomes<String>()
    held.hold("first", for: "c1", until: 3)
    held.hold("second", for: "c1", until: 2)  // an older ticket, queued behind a newer one
    #expect(held.release(upTo: 2).isEmpty)
    #expect(held.release(upTo: 3) == ["first", "second"])
  }
}
