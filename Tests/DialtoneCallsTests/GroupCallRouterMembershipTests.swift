import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls

/// A running group call growing and shrinking: `group-invite`, `group-remove`, and the owner of a
/// room ending it. Inputs in, reply and effects out, with virtual time.
struct GroupCallRouterMembershipTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "phone", name: "Bob")
  let carol = Identity(userId: "carol", deviceId: "phone", name: nil)
  let carolLaptop = Identity(userId: "carol", deviceId: "laptop", name: nil)
  let dave = Identity(userId: "dave", deviceId: "phone", name: nil)
  let mallory = Identity(userId: "mallory", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

  private func invites(_ effects: [CallEffect]) -> [(ServerMessage.GroupInvite, Recipient)] {
    sends(effects).compactMap {
      if case .groupInvite(let i) = $0.0 { return (i, $0.1) }
      return nil
    }
  }
  private func updated(_ effects: [CallEffect]) -> [Recipient] {
    sends(effects).compactMap {
      if case .groupUpdate = $0.0 { return $0.1 }
      return nil
    }
  }
  private func ended(_ effects: [CallEffect]) -> [(GroupEndReason, Recipient, Peer?)] {
    sends(effects).compactMap {
      if case .groupEnded(let e) = $0.0 { return (e.reason, $0.1, e.from) }
      return nil
    }
  }
  private func sfu(_ effects: [CallEffect]) -> [SFUCommand] {
    effects.compactMap {
      if case .sfu(let c) = $0 { return c }
      return nil
    }
  }
  private func pushes(_ effects: [CallEffect]) -> [GroupRing] {
    effects.compactMap {
      if case .external(.groupRinging(let ring)) = $0 { return ring }
      return nil
    }
  }
  private func records(_ effects: [CallEffect]) -> [GroupCallRecord] {
    effects.compactMap {
      if case .external(.groupEnded(let r)) = $0 { return r }
      return nil
    }
  }
  private func reaches(_ userId: String, _ effects: [CallEffect]) -> Bool {
    sends(effects).contains {
      switch $0.1 {
      case .user(let u, _), .device(let u, _): return u == userId
      }
    }
  }
  private func memberStates(_ router: GroupCallRouter, _ callId: CallID = "g1") -> [String: GroupMemberState] {
    Dictionary(
      uniqueKeysWithValues: (router.state(callId, visibleTo: alice)?.members ?? []).map { ($0.userId, $0.state) })
  }

  /// Alice rings `members`; those in `joined` answer.
  private func running(
    _ router: inout GroupCallRouter, members: [String] = ["bob", "carol"], joined: [Identity] = [],
    blocks: [String: String] = [:]
  ) {
    _ = router.handle(
      .groupCreate(.init(callId: "g1", members: members, video: false, title: "Standup")), id: "c1", from: alice,
      now: t0, blocks: { blocks[$0] == $1 })
    for who in joined {
      _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j-\(who.userId)", from: who, now: at(1))
    }
  }

  private func invite(
    _ router: inout GroupCallRouter, _ members: [String], by who: Identity, at seconds: Double = 5,
    blocks: [String: String] = [:]
  ) -> CallRouter.Outcome {
    router.handle(
      .groupInvite(.init(callId: "g1", members: members)), id: "i1", from: who, now: at(seconds),
      blocks: { blocks[$0] == $1 })
  }

  private func remove(_ router: inout GroupCallRouter, _ userId: String, by who: Identity, at seconds: Double = 5)
    -> CallRouter.Outcome
  {
    router.handle(.groupRemove(.init(callId: "g1", userId: userId)), id: "r1", from: who, now: at(seconds))
  }

  // MARK: - Invite

  @Test func anInviteMidCallRingsLikeTheCreateFromTheInviter() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    let outcome = invite(&router, ["dave"], by: bob)
    #expect(outcome.reply.isAck)
    #expect(memberStates(router) == ["alice": .joined, "bob": .joined, "dave": .invited])
    let rung = invites(outcome.effects)
    #expect(rung.map(\.1) == [.user(userId: "dave", exceptDevice: nil)])
    #expect(rung.first?.0.from == bob.peer && rung.first?.0.memberCount == 3 && rung.first?.0.title == "Standup")
    #expect(rung.first?.0.createdAt == t0.millisecondsSince1970)
    #expect(pushes(outcome.effects).map(\.memberId) == ["dave"])
    #expect(pushes(outcome.effects).first?.creator == bob.peer)
    #expect(pushes(outcome.effects).first?.createdAt == at(5))
    #expect(
      outcome.effects.contains(
        .schedule(CallTimer(callId: "g1", kind: .memberRing(userId: "dave")), after: .seconds(45))))
    #expect(
      Set(updated(outcome.effects)) == [
        .user(userId: "alice", exceptDevice: nil), .user(userId: "bob", exceptDevice: nil),
        .user(userId: "dave", exceptDevice: nil),
      ])
    // Dave answers like any ring, and a new session of his is rung again meanwhile from Bob.
    let redelivered = router.deviceConnected(dave, newSession: true)
    #expect(invites(redelivered).first?.0.from == bob.peer)
    let joins = router.handle(.groupJoin(.init(callId: "g1")), id: "j", from: dave, now: at(7))
    #expect(joins.reply.isAck)
    #expect(sfu(joins.effects) == [.join(callId: "g1", participant: dave)])
  }

  @Test func anInviteThatTimesOutIsMissedAndTheCallGoesOn() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    _ = invite(&router, ["dave"], by: bob)
    let fired = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "dave")), now: at(50))
    #expect(ended(fired).map(\.0) == [.missed])
    #expect(memberStates(router)["dave"] == .missed)
    #expect(router.state("g1", visibleTo: alice)?.state == .active)
  }

  @Test func membersAlreadyRungOrInTheCallAreNotRungAgainButThoseWhoDeclinedAre() {
    var router = GroupCallRouter()
    running(&router, members: ["bob", "carol"], joined: [bob])
    _ = router.handle(.groupDecline(.init(callId: "g1")), id: "d", from: carol, now: at(2))
    let again = invite(&router, ["bob", "alice"], by: alice)
    #expect(again.reply.isAck)
    #expect(again.effects.isEmpty)
    let carolAgain = invite(&router, ["carol"], by: alice)
    #expect(invites(carolAgain.effects).map(\.1) == [.user(userId: "carol", exceptDevice: nil)])
    #expect(memberStates(router)["carol"] == .invited)
  }

  @Test func onlyAMemberInTheCallMayInvite() {
    var router = GroupCallRouter()
    running(&router, members: ["bob", "carol"], joined: [bob])
    #expect(invite(&router, ["dave"], by: mallory).reply.errorCode == .notFound)
    #expect(invite(&router, ["dave"], by: carol).reply.errorCode == .invalidState)  // rung, not in the call
    #expect(invite(&router, ["bob"], by: alice).reply.isAck)
    #expect(invite(&router, [], by: bob).reply.errorCode == .badRequest)
    #expect(invite(&router, ["bob"], by: bob).reply.errorCode == .badRequest)
    #expect(invite(&router, [String(repeating: "x", count: 200)], by: bob).reply.errorCode == .badRequest)
    #expect(memberStates(router).count == 3)
  }

  @Test func theOwnerPolicyLetsOnlyTheCreatorInvite() {
    var router = GroupCallRouter(settings: .init(invitePolicy: .owner))
    running(&router, members: ["bob"], joined: [bob])
    #expect(invite(&router, ["dave"], by: bob).reply.errorCode == .forbidden)
    #expect(memberStates(router)["dave"] == nil)
    #expect(invite(&router, ["dave"], by: alice).reply.isAck)
  }

  @Test func theRingLimitHoldsForEveryoneRingingAtOnce() {
    var router = GroupCallRouter(settings: .init(ringLimit: 2))
    running(&router, members: ["bob"])
    let over = invite(&router, ["carol", "dave"], by: alice)
    #expect(over.reply.errorCode == .tooLarge)
    #expect(over.effects.isEmpty)
    #expect(invite(&router, ["carol"], by: alice).reply.isAck)
    #expect(invite(&router, ["dave"], by: alice).reply.errorCode == .tooLarge)
  }

  @Test func theMemberLimitHolds() {
    var router = GroupCallRouter(settings: .init(maxMembers: 3))
    running(&router, members: ["bob", "carol"], joined: [bob])
    #expect(invite(&router, ["dave"], by: bob).reply.errorCode == .tooLarge)
    // A removed member frees a place.
    #expect(remove(&router, "carol", by: alice).reply.isAck)
    #expect(invite(&router, ["dave"], by: bob).reply.isAck)
  }

  @Test func aUserWhoBlocksTheInviterIsSilentlyNotRung() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    let outcome = invite(&router, ["dave"], by: bob, blocks: ["dave": "bob"])
    #expect(outcome.reply.isAck)
    #expect(!reaches("dave", outcome.effects))
    #expect(pushes(outcome.effects).isEmpty)
    // Listed like anyone invited, to the others; for Dave the call does not exist.
    #expect(memberStates(router)["dave"] == .invited)
    #expect(router.state("g1", visibleTo: dave) == nil)
    #expect(
      router.handle(.groupJoin(.init(callId: "g1")), id: "j", from: dave, now: at(6)).reply.errorCode == .notFound)
    #expect(router.deviceConnected(dave, newSession: true).isEmpty)
    let fired = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "dave")), now: at(50))
    #expect(!reaches("dave", fired))
    #expect(memberStates(router)["dave"] == .missed)
  }

  @Test func aUserSilencedByOneInvitersBlockIsRungByAnotherInviter() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    _ = invite(&router, ["dave"], by: bob, blocks: ["dave": "bob"])
    _ = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "dave")), now: at(50))
    let again = invite(&router, ["dave"], by: alice, at: 60, blocks: ["dave": "bob"])
    #expect(invites(again.effects).map(\.1) == [.user(userId: "dave", exceptDevice: nil)])
    #expect(router.state("g1", visibleTo: dave)?.member("dave")?.state == .invited)
  }

  @Test func aUserWhoBlocksTheCreatorIsSilencedWhoeverInvitesThem() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    let outcome = invite(&router, ["dave"], by: bob, blocks: ["dave": "alice"])
    #expect(outcome.reply.isAck)
    #expect(!reaches("dave", outcome.effects))
    #expect(router.silencedMembers(of: "g1") == ["dave"])
  }

  @Test func aMemberWhoDeclinedAndBlocksTheInviterIsNotRungAgain() {
    var router = GroupCallRouter()
    running(&router, members: ["bob", "carol"], joined: [bob])
    _ = router.handle(.groupDecline(.init(callId: "g1")), id: "d", from: carol, now: at(2))
    let outcome = invite(&router, ["carol"], by: bob, blocks: ["carol": "bob"])
    #expect(outcome.reply.isAck)
    #expect(!reaches("carol", outcome.effects))
    #expect(memberStates(router)["carol"] == .declined)
  }

  @Test func anEndedCallTakesNoInvite() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    _ = router.handle(.groupEnd(.init(callId: "g1")), id: "e", from: alice, now: at(3))
    #expect(invite(&router, ["dave"], by: alice).reply.errorCode == .invalidState)
  }

  // MARK: - Remove

  @Test func theOwnerRemovesAMemberInTheCall() {
    var router = GroupCallRouter()
    running(&router, joined: [bob, carol])
    let outcome = remove(&router, "carol", by: alice)
    guard case .ack(let ack) = outcome.reply else {
      Issue.record("not acked")
      return
    }
    #expect(ack.group?.members.first { $0.userId == "carol" }?.state == .removed)
    // Her media goes at once; every device of hers is told, and who did it.
    #expect(sfu(outcome.effects) == [.leave(callId: "g1", participant: carol)])
    #expect(
      outcome.effects.contains(.cancel(CallTimer(callId: "g1", kind: .grace(userId: "carol", deviceId: "phone")))))
    #expect(ended(outcome.effects).map(\.0) == [.removed])
    #expect(ended(outcome.effects).first?.1 == .user(userId: "carol", exceptDevice: nil))
    #expect(ended(outcome.effects).first?.2 == alice.peer)
    #expect(
      Set(updated(outcome.effects)) == [
        .user(userId: "alice", exceptDevice: nil), .user(userId: "bob", exceptDevice: nil),
      ])
    #expect(router.state("g1", visibleTo: alice)?.state == .active)
    #expect(!router.isJoined(carol, in: "g1"))
  }

  @Test func aRemovedMemberIsNoMemberAnyMore() {
    var router = GroupCallRouter()
    running(&router, joined: [bob, carol])
    _ = remove(&router, "carol", by: alice)
    let refused: [ClientMessage] = [
      .groupJoin(.init(callId: "g1")), .getGroup(.init(callId: "g1")), .groupLeave(.init(callId: "g1")),
      .groupOffer(.init(callId: "g1", stream: "publisher", sdp: "v=0\r\n")),
      .groupAnswer(.init(callId: "g1", stream: "feed-1", sdp: "v=0\r\n")),
      .groupCandidate(.init(callId: "g1", stream: "publisher", candidate: IceCandidate(candidate: "candidate:1"))),
      .groupEndOfCandidates(.init(callId: "g1", stream: "publisher")), .groupRinging(.init(callId: "g1")),
      .groupDecline(.init(callId: "g1")), .groupInvite(.init(callId: "g1", members: ["dave"])),
    ]
    for message in refused {
      for device in [carol, carolLaptop] {
        let outcome = router.handle(message, id: "x", from: device, now: at(6))
        #expect(outcome.reply.errorCode == .notFound, "\(message.type.rawValue)")
        #expect(outcome.effects.isEmpty)
      }
    }
    #expect(router.state("g1", visibleTo: carol) == nil)
    #expect(router.deviceConnected(carolLaptop, newSession: true).isEmpty)
    // Updates of the call no longer reach her.
    let bobLeaves = router.handle(.groupLeave(.init(callId: "g1")), id: "l", from: bob, now: at(7))
    #expect(!reaches("carol", bobLeaves.effects))
  }

  @Test func theHistoryKeepsTheRemovedMemberAsRemoved() {
    var router = GroupCallRouter()
    running(&router, joined: [bob, carol])
    _ = remove(&router, "carol", by: alice, at: 11)
    let end = router.handle(.groupEnd(.init(callId: "g1")), id: "e", from: alice, now: at(20))
    #expect(!reaches("carol", end.effects))
    let participant = records(end.effects).first?.participants.first { $0.userId == "carol" }
    #expect(participant?.outcome == .removed)
    #expect(participant?.durationMs == 10_000)
  }

  @Test func onlyTheOwnerRemovesAndOnlyMembers() {
    var router = GroupCallRouter()
    running(&router, joined: [bob, carol])
    #expect(remove(&router, "carol", by: bob).reply.errorCode == .forbidden)
    #expect(remove(&router, "carol", by: mallory).reply.errorCode == .notFound)
    #expect(remove(&router, "mallory", by: alice).reply.errorCode == .notFound)
    #expect(remove(&router, "alice", by: alice).reply.errorCode == .badRequest)
    #expect(memberStates(router) == ["alice": .joined, "bob": .joined, "carol": .joined])
    #expect(remove(&router, "carol", by: alice).reply.isAck)
    #expect(remove(&router, "carol", by: alice).reply.errorCode == .notFound)
  }

  @Test func removingARingingMemberStopsTheRing() {
    var router = GroupCallRouter()
    running(&router, joined: [bob])
    let outcome = remove(&router, "carol", by: alice)
    #expect(outcome.effects.contains(.cancel(CallTimer(callId: "g1", kind: .memberRing(userId: "carol")))))
    #expect(outcome.effects.contains(.external(.groupRingStopped(callId: "g1", memberId: "carol"))))
    #expect(ended(outcome.effects).map(\.0) == [.removed])
    #expect(sfu(outcome.effects).isEmpty)
  }

  @Test func removingTheLastOneRungBeforeAnyoneJoinedCancelsTheCall() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"])
    let outcome = remove(&router, "bob", by: alice)
    #expect(outcome.reply.isAck)
    #expect(router.state("g1", visibleTo: alice)?.state == .ended)
    #expect(records(outcome.effects).first?.endReason == .cancelled)
    #expect(sfu(outcome.effects).contains(.close(callId: "g1")))
  }

  @Test func removingTheLastOneInTheCallCompletesIt() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    _ = router.handle(.groupLeave(.init(callId: "g1")), id: "l", from: alice, now: at(3))
    let outcome = remove(&router, "bob", by: alice)
    #expect(records(outcome.effects).first?.endReason == .completed)
    #expect(ended(outcome.effects).map(\.0) == [.removed])
  }

  @Test func onlyTheOwnerInvitesARemovedMemberBack() {
    var router = GroupCallRouter()
    running(&router, joined: [bob, carol])
    _ = remove(&router, "carol", by: alice)
    #expect(invite(&router, ["carol"], by: bob).reply.errorCode == .forbidden)
    let back = invite(&router, ["carol"], by: alice)
    #expect(back.reply.isAck)
    #expect(invites(back.effects).map(\.1) == [.user(userId: "carol", exceptDevice: nil)])
    #expect(router.handle(.groupJoin(.init(callId: "g1")), id: "j", from: carol, now: at(8)).reply.isAck)
  }

  // MARK: - Rooms

  private func room(_ router: inout GroupCallRouter, _ who: Identity, at seconds: Double) -> CallRouter.Outcome {
    router.handle(.roomJoin(.init(room: "book-club", callId: "r1")), id: "rj", from: who, now: at(seconds))
  }

  @Test func aRoomsOwnerIsWhoStartedItsCall() {
    var router = GroupCallRouter()
    _ = room(&router, alice, at: 0)
    _ = room(&router, bob, at: 1)
    _ = room(&router, carol, at: 2)
    #expect(
      router.handle(.groupRemove(.init(callId: "r1", userId: "carol")), id: "x", from: bob, now: at(3)).reply.errorCode
        == .forbidden)
    #expect(router.handle(.groupEnd(.init(callId: "r1")), id: "x", from: bob, now: at(3)).reply.errorCode == .forbidden)
    let removed = router.handle(.groupRemove(.init(callId: "r1", userId: "carol")), id: "x", from: alice, now: at(4))
    #expect(removed.reply.isAck)
    #expect(sfu(removed.effects) == [.leave(callId: "r1", participant: carol)])
    // Not back by the room's name while this call lasts…
    #expect(room(&router, carol, at: 5).reply.errorCode == .forbidden)
    #expect(
      router.handle(.groupJoin(.init(callId: "r1")), id: "x", from: carol, now: at(5)).reply.errorCode == .notFound)
    // …and the owner ends the room for everyone.
    let end = router.handle(.groupEnd(.init(callId: "r1")), id: "e", from: alice, now: at(6))
    #expect(end.reply.isAck)
    #expect(ended(end.effects).map(\.0) == [.ended])
    #expect(ended(end.effects).first?.1 == .device(userId: "bob", deviceId: "phone"))
    #expect(records(end.effects).first?.endReason == .ended)
    // The next join by name starts a new call, which the removed member may enter.
    let next = router.handle(.roomJoin(.init(room: "book-club", callId: "r2")), id: "rj", from: carol, now: at(7))
    #expect(next.reply.isAck)
    #expect(router.state("r2", visibleTo: carol)?.creatorId == "carol")
  }

  @Test func aRemovalFreesAPlaceInAFullRoom() {
    var router = GroupCallRouter(settings: .init(maxMembers: 2))
    _ = room(&router, alice, at: 0)
    _ = room(&router, bob, at: 1)
    #expect(room(&router, carol, at: 2).reply.errorCode == .tooLarge)
    _ = router.handle(.groupRemove(.init(callId: "r1", userId: "bob")), id: "x", from: alice, now: at(3))
    #expect(room(&router, carol, at: 4).reply.isAck)
  }

  @Test func aRoomsOwnerEndsItEvenAfterLeaving() {
    var router = GroupCallRouter()
    _ = room(&router, alice, at: 0)
    _ = room(&router, bob, at: 1)
    _ = router.handle(.groupLeave(.init(callId: "r1")), id: "l", from: alice, now: at(2))
    let end = router.handle(.groupEnd(.init(callId: "r1")), id: "e", from: alice, now: at(3))
    #expect(end.reply.isAck)
    #expect(ended(end.effects).map(\.0) == [.ended])
  }

  // MARK: - Repeated joins

  @Test func theSameDeviceJoiningAgainIsAcknowledgedWithoutAnotherWayIntoTheMedia() {
    var router = GroupCallRouter()
    running(&router, members: ["bob"], joined: [bob])
    let again = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: bob, now: at(4))
    #expect(again.reply.isAck)
    #expect(again.effects.isEmpty)  // no SFU join: no second group-media
  }
}
