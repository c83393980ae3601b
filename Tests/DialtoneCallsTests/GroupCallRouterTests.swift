import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// The group state machine alone: inputs in, reply and effects out, with virtual time.
struct GroupCallRouterTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bobPhone = Identity(userId: "bob", deviceId: "phone", name: nil)
  let bobLaptop = Identity(userId: "bob", deviceId: "laptop", name: nil)
  let carol = Identity(userId: "carol", deviceId: "phone", name: nil)
  let mallory = Identity(userId: "mallory", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

  private func ended(_ effects: [CallEffect]) -> [(GroupEndReason, Recipient)] {
    sends(effects).compactMap {
      if case .groupEnded(let e) = $0.0 { return (e.reason, $0.1) }
      return nil
    }
  }
  private func sfu(_ effects: [CallEffect]) -> [SFUCommand] {
    effects.compactMap {
      if case .sfu(let c) = $0 { return c }
      return nil
    }
  }
  private func records(_ effects: [CallEffect]) -> [GroupCallRecord] {
    effects.compactMap {
      if case .external(.groupEnded(let r)) = $0 { return r }
      return nil
    }
  }
  private func memberStates(_ router: GroupCallRouter, _ callId: CallID = "g1") -> [String: GroupMemberState] {
    Dictionary(
      uniqueKeysWithValues: (router.state(callId, visibleTo: alice)?.members ?? []).map { ($0.userId, $0.state) })
  }
  private func errorCode(_ outcome: CallRouter.Outcome) -> ErrorCode? {
    if case .error(let e) = outcome.reply { return e.code }
    return nil
  }

  private func created(_ router: inout GroupCallRouter, members: [String] = ["bob", "carol"]) -> CallRouter.Outcome {
    router.handle(
      .groupCreate(.init(callId: "g1", members: members, video: false, title: "Standup")), id: "c1", from: alice,
      now: t0)
  }

  @Test func createRingsEveryMemberJoinsTheCreatorAndOpensTheRoom() {
    var router = GroupCallRouter()
    let outcome = created(&router)
    guard case .ack(let ack) = outcome.reply else {
      Issue.record("not acked")
      return
    }
    #expect(ack.group?.members.map(\.userId) == ["alice", "bob", "carol"])
    #expect(ack.group?.state == .ringing)
    #expect(
      sfu(outcome.effects) == [.open(callId: "g1", video: false), .join(callId: "g1", participant: alice)])
    let invites = sends(outcome.effects).filter { if case .groupInvite = $0.0 { return true } else { return false } }
    #expect(invites.map(\.1) == [.user(userId: "bob", exceptDevice: nil), .user(userId: "carol", exceptDevice: nil)])
    if case .groupInvite(let invite) = invites.first?.0 {
      #expect(invite.memberCount == 3 && invite.title == "Standup" && invite.from.userId == "alice")
    }
    let rings = outcome.effects.filter {
      if case .schedule(let t, .seconds(45)) = $0, case .memberRing = t.kind { return true }
      return false
    }
    #expect(rings.count == 2)
    let pushes = outcome.effects.filter { if case .external(.groupRinging) = $0 { return true } else { return false } }
    #expect(pushes.count == 2)
    #expect(memberStates(router) == ["alice": .joined, "bob": .invited, "carol": .invited])
  }

  @Test func aDeclineStopsOnlyThatUsersOtherDevicesAndTheCallGoesOn() {
    var router = GroupCallRouter()
    _ = created(&router)
    let outcome = router.handle(.groupDecline(.init(callId: "g1")), id: "d1", from: bobPhone, now: at(2))
    #expect(errorCode(outcome) == nil)
    #expect(
      ended(outcome.effects).map(\.1).contains(.user(userId: "bob", exceptDevice: "phone")))
    #expect(!ended(outcome.effects).contains { $0.1 == .user(userId: "carol", exceptDevice: nil) })
    #expect(memberStates(router)["bob"] == .declined)
    #expect(memberStates(router)["carol"] == .invited)
    #expect(router.state("g1", visibleTo: alice)?.state == .ringing)
    // every member's devices hear of it
    let updated = sends(outcome.effects).filter { if case .groupUpdate = $0.0 { return true } else { return false } }
    #expect(Set(updated.map(\.1)).count == 3)
  }

  /// A device's request for one subscriber connection (protocol.md 20.9) reaches the SFU with
  /// its join, however it joined: creating, joining, or entering a room by name.
  @Test func eachJoinCarriesTheDevicesRequestForOneSubscriberConnection() {
    var router = GroupCallRouter()
    let create = router.handle(
      .groupCreate(.init(callId: "g1", members: ["bob", "carol"], multistream: true)), id: "c1", from: alice, now: t0)
    #expect(
      sfu(create.effects) == [
        .open(callId: "g1", video: false), .join(callId: "g1", participant: alice, multistream: true),
      ])
    let bob = router.handle(.groupJoin(.init(callId: "g1", multistream: true)), id: "j1", from: bobLaptop, now: at(1))
    #expect(sfu(bob.effects) == [.join(callId: "g1", participant: bobLaptop, multistream: true)])
    let carol = Identity(userId: "carol", deviceId: "web", name: nil)
    let plain = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: carol, now: at(2))
    #expect(sfu(plain.effects) == [.join(callId: "g1", participant: carol, multistream: false)])
    let room = router.handle(
      .roomJoin(.init(room: "book-club", callId: "r1", multistream: true)), id: "r", from: bobPhone, now: at(3))
    #expect(
      sfu(room.effects) == [
        .open(callId: "r1", video: false), .join(callId: "r1", participant: bobPhone, multistream: true),
      ])
    let second = router.handle(
      .roomJoin(.init(room: "book-club", multistream: true)), id: "r2", from: alice, now: at(4))
    #expect(sfu(second.effects) == [.join(callId: "r1", participant: alice, multistream: true)])
  }

  @Test func joiningOnOneDeviceStopsTheUsersOthersAndActivatesTheCall() {
    var router = GroupCallRouter()
    _ = created(&router)
    let outcome = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobLaptop, now: at(3))
    #expect(errorCode(outcome) == nil)
    #expect(ended(outcome.effects).contains { $0 == (.joinedElsewhere, .user(userId: "bob", exceptDevice: "laptop")) })
    #expect(sfu(outcome.effects) == [.join(callId: "g1", participant: bobLaptop)])
    #expect(
      outcome.effects.contains {
        if case .cancel(let t) = $0 { return t.kind == .memberRing(userId: "bob") } else { return false }
      })
    #expect(router.state("g1", visibleTo: alice)?.state == .active)
    // the other device cannot join too
    let second = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: bobPhone, now: at(4))
    #expect(errorCode(second) == .invalidState)
    // the same device again is acknowledged (a retry)
    #expect(errorCode(router.handle(.groupJoin(.init(callId: "g1")), id: "j3", from: bobLaptop, now: at(4))) == nil)
  }

  @Test func eachMembersRingTimesOutToMissedOnItsOwnAndTheyMayJoinLater() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(5))
    let bobTimeout = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "bob")), now: at(45))
    #expect(bobTimeout.isEmpty)  // bob joined: his ring is over already
    let carolTimeout = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "carol")), now: at(45))
    #expect(ended(carolTimeout).map(\.0) == [.missed])
    #expect(memberStates(router)["carol"] == .missed)
    #expect(router.state("g1", visibleTo: alice)?.state == .active)
    let late = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: carol, now: at(60))
    #expect(errorCode(late) == nil)
    #expect(memberStates(router)["carol"] == .joined)
  }

  @Test func theCreatorCancelsBeforeAnyoneJoined() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupRinging(.init(callId: "g1")), id: "r1", from: bobPhone, now: at(1))
    #expect(memberStates(router)["bob"] == .ringing)
    let outcome = router.handle(.groupEnd(.init(callId: "g1")), id: "e1", from: alice, now: at(2))
    #expect(errorCode(outcome) == nil)
    #expect(Set(ended(outcome.effects).map(\.0)) == [.cancelled])
    #expect(
      Set(ended(outcome.effects).map(\.1)) == [
        .user(userId: "bob", exceptDevice: nil), .user(userId: "carol", exceptDevice: nil),
      ])
    #expect(sfu(outcome.effects).contains(.close(callId: "g1")))
    #expect(records(outcome.effects).first?.endReason == .cancelled)
    #expect(router.state("g1", visibleTo: alice)?.state == .ended)
  }

  @Test func theCreatorEndsForEveryoneOnceActive() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(2))
    let outcome = router.handle(.groupEnd(.init(callId: "g1")), id: "e1", from: alice, now: at(12))
    #expect(ended(outcome.effects).contains { $0 == (.ended, .device(userId: "bob", deviceId: "phone")) })
    #expect(ended(outcome.effects).contains { $0 == (.ended, .user(userId: "carol", exceptDevice: nil)) })
    let record = records(outcome.effects).first
    #expect(record?.endReason == .ended)
    let bob = record?.participants.first { $0.userId == "bob" }
    #expect(bob?.durationMs == 10_000 && bob?.outcome == .left)
    #expect(record?.participants.first { $0.userId == "carol" }?.outcome == .missed)
  }

  @Test func onlyTheCreatorMayEndForAll() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(2))
    #expect(
      errorCode(router.handle(.groupEnd(.init(callId: "g1")), id: "e1", from: bobPhone, now: at(3))) == .forbidden)
  }

  @Test func aLeaveKeepsTheCallForTheRestAndTheLastOneOutEndsIt() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(2))
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: carol, now: at(2))
    let aliceLeaves = router.handle(.groupLeave(.init(callId: "g1")), id: "l1", from: alice, now: at(5))
    #expect(sfu(aliceLeaves.effects) == [.leave(callId: "g1", participant: alice)])
    #expect(memberStates(router)["alice"] == .left)
    #expect(router.state("g1", visibleTo: bobPhone)?.state == .active)
    _ = router.handle(.groupLeave(.init(callId: "g1")), id: "l2", from: bobPhone, now: at(6))
    let last = router.handle(.groupLeave(.init(callId: "g1")), id: "l3", from: carol, now: at(7))
    #expect(records(last.effects).first?.endReason == .completed)
    #expect(sfu(last.effects).contains(.close(callId: "g1")))
  }

  @Test func everyoneDecliningOrMissingEndsTheCallAsUnanswered() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupDecline(.init(callId: "g1")), id: "d1", from: bobPhone, now: at(2))
    let missed = router.timerFired(CallTimer(callId: "g1", kind: .memberRing(userId: "carol")), now: at(45))
    #expect(ended(missed).contains { $0 == (.unanswered, .device(userId: "alice", deviceId: "phone")) })
    #expect(records(missed).first?.endReason == .unanswered)
  }

  @Test func aJoinedDeviceThatDropsLeavesAfterTheGraceUnlessItComesBack() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(2))
    let drop = router.deviceDisconnected(bobPhone)
    guard case .schedule(let timer, .seconds(30)) = drop.first else {
      Issue.record("no grace")
      return
    }
    let back = router.deviceConnected(bobPhone, newSession: false)
    #expect(back.contains { if case .cancel(timer) = $0 { return true } else { return false } })
    let gone = router.timerFired(timer, now: at(40))
    #expect(memberStates(router)["bob"] == .left)
    #expect(ended(gone).contains { $0 == (.connectionLost, .device(userId: "bob", deviceId: "phone")) })
  }

  @Test func aNewSessionOfAMemberStillRingingGetsTheInviteAgain() {
    var router = GroupCallRouter()
    _ = created(&router)
    let effects = router.deviceConnected(bobLaptop, newSession: true)
    #expect(
      sends(effects).contains {
        if case .groupInvite = $0.0 { return $0.1 == .device(userId: "bob", deviceId: "laptop") } else { return false }
      })
  }

  @Test func theMediaServerFailingEndsTheCallForEveryone() {
    var router = GroupCallRouter()
    _ = created(&router)
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(2))
    let effects = router.mediaFailed("g1", now: at(3))
    #expect(
      Set(ended(effects).map(\.1)) == [
        .device(userId: "alice", deviceId: "phone"), .device(userId: "bob", deviceId: "phone"),
        .user(userId: "carol", exceptDevice: nil),
      ])
    #expect(Set(ended(effects).map(\.0)) == [.mediaFailed])
  }

  @Test func roomsByNameStartWithTheFirstOneInAndTakeOthersWithoutRinging() {
    var router = GroupCallRouter()
    let first = router.handle(.roomJoin(.init(room: "book-club", callId: "r1")), id: "a", from: alice, now: t0)
    guard case .ack(let ack) = first.reply else {
      Issue.record("not acked")
      return
    }
    #expect(ack.group?.room == "book-club" && ack.group?.state == .active)
    #expect(!sends(first.effects).contains { if case .groupInvite = $0.0 { return true } else { return false } })
    let second = router.handle(
      .roomJoin(.init(room: "book-club", callId: "other")), id: "b", from: bobPhone, now: at(1))
    guard case .ack(let ack2) = second.reply else {
      Issue.record("not acked")
      return
    }
    #expect(ack2.callId == "r1")
    #expect(sfu(second.effects) == [.join(callId: "r1", participant: bobPhone)])
    // everyone out: the room is free for a new call
    _ = router.handle(.groupLeave(.init(callId: "r1")), id: "l1", from: alice, now: at(2))
    _ = router.handle(.groupLeave(.init(callId: "r1")), id: "l2", from: bobPhone, now: at(3))
    let again = router.handle(.roomJoin(.init(room: "book-club", callId: "r2")), id: "c", from: carol, now: at(4))
    if case .ack(let ack3) = again.reply { #expect(ack3.callId == "r2") } else { Issue.record("not acked") }
  }

  /// 18.2 "Only members may join": a room's call id is no way in. Whoever never entered the room
  /// by name is refused everything by id, exactly as for an unknown id, and changes nothing.
  @Test func aRoomsCallIdLetsOnlyItsMembersIn() {
    var router = GroupCallRouter()
    _ = router.handle(.roomJoin(.init(room: "book-club", callId: "r1")), id: "a", from: alice, now: t0)
    let byId: [ClientMessage] = [
      .groupJoin(.init(callId: "r1")),
      .groupOffer(.init(callId: "r1", stream: "publisher", sdp: "v=0")),
      .groupAnswer(.init(callId: "r1", stream: "feed-1", sdp: "v=0")),
      .groupCandidate(.init(callId: "r1", stream: "publisher", candidate: IceCandidate(candidate: "candidate:1"))),
      .groupEndOfCandidates(.init(callId: "r1", stream: "publisher")),
      .groupLeave(.init(callId: "r1")),
      .groupDecline(.init(callId: "r1")),
      .groupRinging(.init(callId: "r1")),
      .groupEnd(.init(callId: "r1")),
      .getGroup(.init(callId: "r1")),
    ]
    for (n, message) in byId.enumerated() {
      let outcome = router.handle(message, id: "m\(n)", from: mallory, now: at(1))
      #expect(errorCode(outcome) == .notFound, "\(message.type)")
      #expect(outcome.effects.isEmpty, "\(message.type)")
    }
    #expect(router.state("r1", visibleTo: alice)?.members.map(\.userId) == ["alice"])
    // By name, anyone who knows it comes in; having been in, the id lets them back.
    #expect(errorCode(router.handle(.roomJoin(.init(room: "book-club")), id: "n", from: mallory, now: at(2))) == nil)
    _ = router.handle(.groupLeave(.init(callId: "r1")), id: "l", from: mallory, now: at(3))
    #expect(errorCode(router.handle(.groupJoin(.init(callId: "r1")), id: "j", from: mallory, now: at(4))) == nil)
  }

  /// The grace timer names the device without its display name: the SFU must still be told to
  /// take out the very device that joined (an `Identity` is the device, whatever its name).
  @Test func aDeviceDroppedPastTheGraceLeavesTheSFUUnderItsJoiningIdentity() {
    var router = GroupCallRouter()
    _ = created(&router)
    let bob = Identity(userId: "bob", deviceId: "phone", name: "Bob")
    let join = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bob, now: at(2))
    guard case .join(_, let joined, _) = sfu(join.effects).first,
      case .schedule(let timer, _) = router.deviceDisconnected(bob).first
    else {
      Issue.record("no join or no grace")
      return
    }
    let gone = router.timerFired(timer, now: at(40))
    guard case .leave(_, let left) = sfu(gone).first else {
      Issue.record("the SFU was not told")
      return
    }
    #expect(left == joined && left.hashValue == joined.hashValue)
    var held: [Identity: Int] = [joined: 1]
    #expect(held.removeValue(forKey: left) == 1)
  }

  @Test func oneUserCannotHoldMoreThanItsShareOfSFURooms() {
    var router = GroupCallRouter(settings: .init(maxLiveCallsPerUser: 2))
    for n in 1...2 {
      let outcome = router.handle(
        .groupCreate(.init(callId: "g\(n)", members: ["bob"])), id: "c\(n)", from: alice, now: t0)
      #expect(errorCode(outcome) == nil)
    }
    let third = router.handle(.groupCreate(.init(callId: "g3", members: ["bob"])), id: "c3", from: alice, now: t0)
    #expect(errorCode(third) == .limitExceeded && sfu(third.effects).isEmpty)
    let room = router.handle(.roomJoin(.init(room: "r", callId: "r1")), id: "c4", from: alice, now: t0)
    #expect(errorCode(room) == .limitExceeded && !router.knows("r1"))
    // Another user is not affected; ending one frees a slot.
    #expect(errorCode(router.handle(.roomJoin(.init(room: "r", callId: "r1")), id: "c5", from: carol, now: t0)) == nil)
    _ = router.handle(.groupEnd(.init(callId: "g1")), id: "e1", from: alice, now: at(1))
    #expect(
      errorCode(router.handle(.groupCreate(.init(callId: "g3", members: ["bob"])), id: "c6", from: alice, now: at(2)))
        == nil)
  }

  @Test func negotiationPerJoinIsBoundedAndResetByANewJoin() {
    var router = GroupCallRouter(settings: .init(maxSignalsPerJoin: 3))
    _ = created(&router)
    let candidate = ClientMessage.groupCandidate(
      .init(
        callId: "g1", stream: "publisher", candidate: IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 9 typ host")
      ))
    for n in 1...3 { #expect(errorCode(router.handle(candidate, id: "k\(n)", from: alice, now: t0)) == nil) }
    let fourth = router.handle(candidate, id: "k4", from: alice, now: t0)
    #expect(errorCode(fourth) == .limitExceeded && sfu(fourth.effects).isEmpty)
    // Leaving and joining again starts a new allowance.
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j1", from: bobPhone, now: at(1))
    _ = router.handle(.groupLeave(.init(callId: "g1")), id: "l1", from: alice, now: at(2))
    _ = router.handle(.groupJoin(.init(callId: "g1")), id: "j2", from: alice, now: at(3))
    #expect(errorCode(router.handle(candidate, id: "k5", from: alice, now: at(4))) == nil)
  }

  @Test func badInputIsRefusedWithoutChangingAnything() {
    var router = GroupCallRouter(settings: .init(ringLimit: 2))
    #expect(errorCode(created(&router, members: ["b", "c", "d"])) == .tooLarge)
    #expect(errorCode(created(&router, members: ["alice"])) == .badRequest)
    #expect(errorCode(created(&router, members: [""])) == .badRequest)
    #expect(!router.knows("g1"))
    _ = created(&router)
    // a non-member: joining, offering, reading state, ending: all "no such call"
    #expect(errorCode(router.handle(.groupJoin(.init(callId: "g1")), id: "x", from: mallory, now: at(1))) == .notFound)
    let offer = ClientMessage.groupOffer(.init(callId: "g1", stream: "publisher", sdp: "v=0"))
    #expect(errorCode(router.handle(offer, id: "y", from: mallory, now: at(1))) == .notFound)
    #expect(errorCode(router.handle(.getGroup(.init(callId: "g1")), id: "z", from: mallory, now: at(1))) == .notFound)
    // a member who has not joined may not negotiate
    #expect(errorCode(router.handle(offer, id: "w", from: bobPhone, now: at(1))) == .invalidState)
    // unknown ids
    #expect(
      errorCode(router.handle(.groupJoin(.init(callId: "nope")), id: "v", from: bobPhone, now: at(1))) == .notFound)
    #expect(memberStates(router) == ["alice": .joined, "bob": .invited, "carol": .invited])
    // the joined device's negotiation goes to the SFU
    let relayed = router.handle(offer, id: "u", from: alice, now: at(1))
    #expect(sfu(relayed.effects) == [.signal(callId: "g1", participant: alice, message: offer)])
  }
}
