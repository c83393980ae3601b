import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// A group call whose creator a member blocks, in the state machine alone: the member is listed
/// like anyone who does not answer, and nothing of the call reaches them.
struct GroupCallRouterBlockTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "phone", name: nil)
  let carol = Identity(userId: "carol", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  /// Bob blocks Alice; Alice rings Bob and Carol.
  private func created(_ router: inout GroupCallRouter) -> CallRouter.Outcome {
    router.handle(
      .groupCreate(.init(callId: "g1", members: ["bob", "carol"], video: false, title: "Standup")), id: "c1",
      from: alice, now: t0, blocks: { user, other in user == "bob" && other == "alice" })
  }

  private func reachesBob(_ effects: [CallEffect]) -> Bool {
    effects.contains {
      switch $0 {
      case .send(_, .user("bob", _)), .send(_, .device("bob", _)): return true
      case .external(.groupRinging(let ring)): return ring.memberId == "bob"
      case .external(.groupRingStopped(_, let memberId)): return memberId == "bob"
      default: return false
      }
    }
  }

  private func state(_ router: GroupCallRouter, of userId: String) -> GroupMemberState? {
    router.state("g1", visibleTo: alice)?.members.first { $0.userId == userId }?.state
  }

  @Test func aBlockerIsListedAsInvitedButIsNeitherRungNorPushed() {
    var router = GroupCallRouter()
    let outcome = created(&router)
    #expect(outcome.reply.isAck)
    #expect(!reachesBob(outcome.effects))
    let ringsCarol = outcome.effects.contains {
      if case .external(.groupRinging(let ring)) = $0 { return ring.memberId == "carol" }
      return false
    }
    #expect(ringsCarol)
    // Both ring timers run, so Bob goes the way of someone who does not answer.
    let timers = outcome.effects.filter {
      if case .schedule(let t, _) = $0, case .memberRing = t.kind { return true }
      return false
    }
    #expect(timers.count == 2)
    #expect(state(router, of: "bob") == .invited)
    #expect(router.silencedMembers(of: "g1") == ["bob"])
  }

  @Test func forTheBlockerTheCallDoesNotExist() {
    var router = GroupCallRouter()
    _ = created(&router)
    for message: ClientMessage in [
      .groupRinging(.init(callId: "g1")), .groupJoin(.init(callId: "g1")), .groupDecline(.init(callId: "g1")),
      .getGroup(.init(callId: "g1")), .groupLeave(.init(callId: "g1")), .groupEnd(.init(callId: "g1")),
    ] {
      let refused = router.handle(message, id: "b", from: bob, now: t0)
      #expect(refused.reply.errorCode == .notFound)
      #expect(refused.effects.isEmpty)
    }
    #expect(router.state("g1", visibleTo: bob) == nil)
    #expect(router.deviceConnected(bob, newSession: true).isEmpty)
  }

  @Test func updatesAndTheEndSkipTheBlockerAndTheirTimeoutLooksUnanswered() {
    var router = GroupCallRouter()
    _ = created(&router)
    let joined = router.handle(.groupJoin(.init(callId: "g1")), id: "j", from: carol, now: t0.addingTimeInterval(2))
    #expect(joined.reply.isAck)
    #expect(!reachesBob(joined.effects))

    let missed = router.timerFired(
      CallTimer(callId: "g1", kind: .memberRing(userId: "bob")), now: t0.addingTimeInterval(45))
    #expect(!reachesBob(missed))
    #expect(state(router, of: "bob") == .missed)

    let ended = router.handle(.groupEnd(.init(callId: "g1")), id: "e", from: alice, now: t0.addingTimeInterval(60))
    #expect(ended.reply.isAck)
    #expect(!reachesBob(ended.effects))
    let record = ended.effects.compactMap { effect -> GroupCallRecord? in
      if case .external(.groupEnded(let r)) = effect { return r }
      return nil
    }.first
    #expect(record?.participants.first { $0.userId == "bob" }?.outcome == .missed)
  }

  @Test func theCreatorCancellingWhileTheBlockerIsListedTellsThemNothing() {
    var router = GroupCallRouter()
    _ = created(&router)
    let cancelled = router.handle(.groupEnd(.init(callId: "g1")), id: "e", from: alice, now: t0.addingTimeInterval(3))
    #expect(cancelled.reply.isAck)
    #expect(!reachesBob(cancelled.effects))
    let carolTold = cancelled.effects.contains {
      if case .send(.groupEnded, .user("carol", _)) = $0 { return true }
      return false
    }
    #expect(carolTold)
  }

  @Test func aMemberWhoBlocksSomeoneElseStillRingsForTheCreator() {
    var router = GroupCallRouter()
    // Bob blocks Carol, not Alice: Alice's call rings him.
    let outcome = router.handle(
      .groupCreate(.init(callId: "g1", members: ["bob", "carol"], video: false, title: nil)), id: "c1", from: alice,
      now: t0, blocks: { user, other in user == "bob" && other == "carol" })
    #expect(reachesBob(outcome.effects))
    #expect(router.silencedMembers(of: "g1").isEmpty)
  }
}
