import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls

/// A group call taken over by another cluster node: the journal's snapshot round trip, the
/// router rebuilt from it, and what the new node does then (nobody rung again, the SFU room made
/// again, every device in the call joined afresh), with virtual time.
struct GroupCallTakeOverTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "laptop", name: nil)
  let carol = Identity(userId: "carol", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

  private func sfu(_ effects: [CallEffect]) -> [SFUCommand] {
    effects.compactMap {
      if case .sfu(let c) = $0 { return c }
      return nil
    }
  }
  private func scheduled(_ effects: [CallEffect]) -> [CallTimer: Duration] {
    var timers: [CallTimer: Duration] = [:]
    for case .schedule(let timer, let delay) in effects { timers[timer] = delay }
    return timers
  }
  private func cancelled(_ effects: [CallEffect]) -> Set<CallTimer> {
    var timers: Set<CallTimer> = []
    for case .cancel(let timer) in effects { timers.insert(timer) }
    return timers
  }
  private func external(_ effects: [CallEffect]) -> [CallEvent] {
    effects.compactMap {
      if case .external(let e) = $0 { return e }
      return nil
    }
  }

  /// Alice's call with Bob (joined at 5 s, one subscriber connection) and Carol (ringing,
  /// invited by Bob at 10 s), a member who blocks Alice silenced, on the node that dies.
  private func runningCall() -> GroupCallRouter {
    var router = GroupCallRouter()
    _ = router.handle(
      .groupCreate(.init(callId: "g1", members: ["bob", "dan"], video: true, title: "Standup", multistream: true)),
      id: "c1", from: alice, now: t0, blocks: { user, other in user == "dan" && other == "alice" })
    _ = router.handle(.groupRinging(.init(callId: "g1")), id: "r1", from: bob, now: at(1))
    _ = router.handle(.groupJoin(.init(callId: "g1", multistream: true)), id: "j1", from: bob, now: at(5))
    _ = router.handle(.groupInvite(.init(callId: "g1", members: ["carol"])), id: "i1", from: bob, now: at(10))
    _ = router.handle(.groupRinging(.init(callId: "g1")), id: "r2", from: carol, now: at(11))
    return router
  }

  @Test func theSnapshotRoundTripsThroughTheJournalsJSON() throws {
    let router = runningCall()
    let snapshot = try #require(router.snapshot(of: "g1"))
    let decoded = try MessageCodec.decode(
      GroupCallSnapshot.self, from: MessageCodec.encode(snapshot), options: .lenient)
    #expect(decoded == snapshot)
    #expect(snapshot.members.map(\.userId) == ["alice", "bob", "dan", "carol"])
    #expect(snapshot.members.map(\.state) == [.joined, .joined, .invited, .ringing])
    #expect(snapshot.members[1].multistream && snapshot.members[0].multistream)
    #expect(snapshot.members[3].ringDeadline == at(10 + 45).millisecondsSince1970)
    #expect(snapshot.members[3].invitedBy == bob.peer)
    #expect(snapshot.silenced == ["dan"])
    #expect(snapshot.creator == alice.peer && snapshot.video && snapshot.title == "Standup")
    // An ended call leaves no snapshot: its record is final.
    var ending = router
    _ = ending.handle(.groupEnd(.init(callId: "g1")), id: "e1", from: alice, now: at(20))
    #expect(ending.snapshot(of: "g1") == nil)
  }

  @Test func theRouterRebuiltFromTheSnapshotShowsTheSameCall() throws {
    let before = runningCall()
    let snapshot = try #require(before.snapshot(of: "g1"))
    var after = GroupCallRouter()
    _ = after.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(20))
    #expect(after.state("g1", visibleTo: alice) == before.state("g1", visibleTo: alice))
    #expect(after.silencedMembers(of: "g1") == ["dan"])
    #expect(after.state("g1", visibleTo: Identity(userId: "dan", deviceId: "d", name: nil)) == nil)
    #expect(after.recordIfInterrupted("g1", now: at(30)) == before.recordIfInterrupted("g1", now: at(30)))
    #expect(after.isJoined(bob, in: "g1") && after.isJoined(alice, in: "g1"))
  }

  @Test func takingOverRingsNobodyRemakesTheRoomAndRejoinsEveryDeviceInTheCall() throws {
    let snapshot = try #require(runningCall().snapshot(of: "g1"))
    var router = GroupCallRouter()
    let effects = router.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(20))
    #expect(
      sfu(effects) == [
        .open(callId: "g1", video: true),
        .rejoin(callId: "g1", participant: alice, multistream: true),
        .rejoin(callId: "g1", participant: bob, multistream: true),
      ])
    // Nobody is sent anything, nor pushed: the ring goes on where it was.
    #expect(sends(effects).isEmpty)
    #expect(external(effects).isEmpty)
    // The rings time out at their deadlines (dan's at 45 s, carol's at 55 s); the devices in
    // the call have the reconnect grace until a node says they are connected.
    #expect(
      scheduled(effects) == [
        CallTimer(callId: "g1", kind: .memberRing(userId: "dan")): .seconds(25),
        CallTimer(callId: "g1", kind: .memberRing(userId: "carol")): .seconds(35),
        CallTimer(callId: "g1", kind: .grace(userId: "alice", deviceId: "phone")): .seconds(30),
        CallTimer(callId: "g1", kind: .grace(userId: "bob", deviceId: "laptop")): .seconds(30),
      ])
    #expect(
      cancelled(router.deviceConnected(bob, newSession: false))
        == [CallTimer(callId: "g1", kind: .grace(userId: "bob", deviceId: "laptop"))])
  }

  @Test func aRingWhoseDeadlinePassedWhileNobodyRanTheCallTimesOutAtOnce() throws {
    let snapshot = try #require(runningCall().snapshot(of: "g1"))
    var router = GroupCallRouter()
    let effects = router.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(60))
    #expect(scheduled(effects)[CallTimer(callId: "g1", kind: .memberRing(userId: "carol"))] == .zero)
    let missed = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "carol")), now: at(60))
    #expect(
      sends(missed).contains {
        if case .groupEnded(let e) = $0.0, e.reason == .missed, $0.1 == .user(userId: "carol", exceptDevice: nil) {
          return true
        }
        return false
      })
    #expect(router.state("g1", visibleTo: alice)?.members.first { $0.userId == "carol" }?.state == .missed)
  }

  @Test func theCallGoesOnAfterTheTakeOverAsBefore() throws {
    let snapshot = try #require(runningCall().snapshot(of: "g1"))
    var router = GroupCallRouter()
    _ = router.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(20))
    // Carol answers the ring she got from the dead node; negotiation is relayed to the new room.
    let join = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: carol, now: at(21))
    #expect(sfu(join.effects) == [.join(callId: "g1", participant: carol, multistream: false)])
    let offer = router.handle(
      .groupOffer(.init(callId: "g1", stream: "publisher", sdp: "v=0", restart: .connection)), id: "o1", from: bob,
      now: at(22))
    #expect(sfu(offer.effects).count == 1)
    // Alice leaves, then Bob and Carol: the call completes with everyone's time counted from
    // their joins on the old node.
    _ = router.handle(.groupLeave(.init(callId: "g1")), id: "l1", from: alice, now: at(30))
    _ = router.handle(.groupLeave(.init(callId: "g1")), id: "l2", from: carol, now: at(31))
    let last = router.handle(.groupLeave(.init(callId: "g1")), id: "l3", from: bob, now: at(35))
    let record = try #require(
      external(last.effects).compactMap { event -> GroupCallRecord? in
        if case .groupEnded(let r) = event { return r }
        return nil
      }.first)
    #expect(record.endReason == .completed)
    #expect(record.participants.first { $0.userId == "alice" }?.durationMs == 30_000)
    #expect(record.participants.first { $0.userId == "bob" }?.durationMs == 30_000)
  }

  @Test func aCallRunningHereAlreadyIsNotTakenOverAgain() throws {
    var router = runningCall()
    let snapshot = try #require(router.snapshot(of: "g1"))
    #expect(router.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(20)).isEmpty)
  }

  @Test func relinquishingStopsTheTimersAndClosesTheRoomHereWithoutEndingTheCall() throws {
    let snapshot = try #require(runningCall().snapshot(of: "g1"))
    var router = GroupCallRouter()
    _ = router.adopt(GroupCallRouter.Call(restoring: snapshot), now: at(20))
    let effects = router.relinquish("g1")
    #expect(sfu(effects) == [.close(callId: "g1")])
    #expect(sends(effects).isEmpty && external(effects).isEmpty)
    #expect(
      cancelled(effects) == [
        CallTimer(callId: "g1", kind: .grace(userId: "alice", deviceId: "phone")),
        CallTimer(callId: "g1", kind: .grace(userId: "bob", deviceId: "laptop")),
        CallTimer(callId: "g1", kind: .memberRing(userId: "dan")),
        CallTimer(callId: "g1", kind: .memberRing(userId: "carol")),
      ])
    #expect(!router.knows("g1"))
  }

  @Test func everyChangeTheDeskJournalsCarriesTheStateAndATakeOverRunsIt() throws {
    let desk = CallDesk(router: CallRouter(), groups: GroupCallRouter(), groupCalls: true)
    let create = ClientMessage.groupCreate(.init(callId: "g1", members: ["bob"], video: false))
    guard
      case .outcome(let outcome, _) = desk.handle(
        create, id: "c1", from: alice, now: t0, history: .checked("g1", used: false))
    else {
      Issue.record("the create was not handled")
      return
    }
    let states = outcome.effects.compactMap { effect -> GroupCallSnapshot? in
      if case .persist(.groupLive(_, _, let state)) = effect { return state }
      return nil
    }
    let state = try #require(states.last)
    #expect(state.members.map(\.state) == [.joined, .invited])
    // Another node's desk takes it over from that state: bob's ring goes on, alice is rejoined.
    let other = CallDesk(router: CallRouter(), groups: GroupCallRouter(), groupCalls: true)
    let effects = other.adoptGroups([StoredGroupCall(snapshot: state, epoch: 2)], now: at(3))
    #expect(
      sfu(effects) == [
        .open(callId: "g1", video: false), .rejoin(callId: "g1", participant: alice, multistream: false),
      ])
    #expect(other.runs("g1"))
    #expect(other.groupState("g1", visibleTo: alice)?.members.map(\.state) == [.joined, .invited])
    #expect(sfu(other.relinquish("g1")) == [.close(callId: "g1")])
    #expect(!other.runs("g1"))
  }
}
