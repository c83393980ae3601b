import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// Pre-connect while ringing (protocol.md 11): legs per callee device, relayed only between the
/// caller and that device, and an accept on an answered leg.
struct CallRouterPreconnectTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)
  let offer = SessionDescription(sdp: "v=0 invite offer")

  private func bob(_ device: String) -> Identity { Identity(userId: "bob", deviceId: device, name: nil) }

  private func sends(_ outcome: CallRouter.Outcome) -> [(ServerMessage, Recipient)] {
    outcome.effects.compactMap {
      if case .send(let m, let r) = $0 { return (m, r) }
      return nil
    }
  }

  private func code(_ outcome: CallRouter.Outcome) -> ErrorCode? {
    if case .error(let e) = outcome.reply { return e.code }
    return nil
  }

  private func ringingCall(preconnect: Bool = true) -> CallRouter {
    var router = CallRouter()
    let invite = ClientMessage.invite(
      .init(callId: "call-1", to: "bob", video: false, offer: offer, preconnect: preconnect))
    let outcome = router.handle(invite, id: "i1", from: alice, now: t0)
    guard
      case .send(.invite(let relayed), _) = outcome.effects.first(where: { if case .send = $0 { true } else { false } })
    else {
      Issue.record("no invite relayed")
      return router
    }
    #expect(relayed.preconnect == preconnect)
    return router
  }

  private func askForLeg(_ router: inout CallRouter, _ device: String) -> CallRouter.Outcome {
    router.handle(.ringing(.init(callId: "call-1", preconnect: true)), id: "r-\(device)", from: bob(device), now: t0)
  }

  private func legOffer(_ router: inout CallRouter, to device: String) -> CallRouter.Outcome {
    router.handle(
      .offer(.init(callId: "call-1", sdp: "v=0 leg \(device)", toDevice: device)), id: "o-\(device)", from: alice,
      now: t0)
  }

  private func earlyAnswer(_ router: inout CallRouter, from device: String) -> CallRouter.Outcome {
    router.handle(
      .answer(.init(callId: "call-1", sdp: "v=0 early \(device)")), id: "a-\(device)", from: bob(device), now: t0)
  }

  @Test func aLegRequestReachesTheCallerOnlyWhenTheInviteAskedForPreconnect() {
    var router = ringingCall()
    let asked = askForLeg(&router, "laptop")
    guard case .ringing(let ringing) = sends(asked).first?.0 else {
      Issue.record("ringing not relayed")
      return
    }
    #expect(ringing.preconnect && ringing.from.deviceId == "laptop")
    #expect(sends(asked).first?.1 == .device(userId: "alice", deviceId: "phone"))

    var plain = ringingCall(preconnect: false)
    guard case .ringing(let relayed) = sends(askForLeg(&plain, "laptop")).first?.0 else {
      Issue.record("ringing not relayed")
      return
    }
    #expect(!relayed.preconnect)
    #expect(code(legOffer(&plain, to: "laptop")) == .invalidState)
  }

  @Test func legSignalingGoesOnlyBetweenTheCallerAndThatDeviceAndIsNotHeld() {
    var router = ringingCall()
    _ = askForLeg(&router, "laptop")
    let laptop = Recipient.device(userId: "bob", deviceId: "laptop")
    let offered = sends(legOffer(&router, to: "laptop"))
    #expect(offered.map(\.1) == [laptop])
    guard case .offer(let offer) = offered.first?.0 else { return }
    #expect(offer.leg)
    let candidate = router.handle(
      .candidate(.init(callId: "call-1", candidate: IceCandidate(candidate: "candidate:1"), toDevice: "laptop")),
      id: "c1", from: alice, now: t0)
    #expect(sends(candidate).map(\.1) == [laptop])
    guard case .candidate(let relayed) = sends(candidate).first?.0 else { return }
    #expect(relayed.leg)
    let done = router.handle(
      .endOfCandidates(.init(callId: "call-1", toDevice: "laptop")), id: "e1", from: alice, now: t0)
    #expect(sends(done).map(\.1) == [laptop])
    guard case .endOfCandidates(let end) = sends(done).first?.0 else { return }
    #expect(end.leg)
    // The invite's own candidates go to every device, unmarked.
    let main = router.handle(
      .candidate(.init(callId: "call-1", candidate: IceCandidate(candidate: "candidate:0"))), id: "c0", from: alice,
      now: t0)
    guard case .candidate(let broadcast) = sends(main).first?.0 else { return }
    #expect(!broadcast.leg && sends(main).first?.1 == .user(userId: "bob", exceptDevice: nil))
    // Only the callee device that asked has a leg; no leg offer is held for a device connecting later.
    #expect(code(legOffer(&router, to: "tablet")) == .invalidState)
    let late = router.deviceConnected(bob("tablet"), newSession: true, now: t0)
    let replayed = late.compactMap { effect -> ServerMessage? in
      if case .send(let m, _) = effect { return m }
      return nil
    }
    guard case .invite = replayed.first else {
      Issue.record("the late device did not get the invite")
      return
    }
    // The invite and its own (unmarked) candidate, nothing of the laptop's leg.
    #expect(replayed.count == 2)
    #expect(
      !replayed.contains {
        switch $0 {
        case .offer(let m): return m.leg
        case .candidate(let m): return m.leg
        case .endOfCandidates(let m): return m.leg
        default: return false
        }
      })
  }

  @Test func aLegDevicesEarlyAnswerAndCandidatesReachTheCallerWhileItRings() {
    var router = ringingCall()
    _ = askForLeg(&router, "laptop")
    _ = legOffer(&router, to: "laptop")
    let caller = Recipient.device(userId: "alice", deviceId: "phone")
    let answered = earlyAnswer(&router, from: "laptop")
    guard case .answer(let answer) = sends(answered).first?.0 else {
      Issue.record("the early answer was not relayed")
      return
    }
    #expect(answer.from.deviceId == "laptop" && sends(answered).first?.1 == caller)
    let candidate = router.handle(
      .candidate(.init(callId: "call-1", candidate: IceCandidate(candidate: "candidate:2"))), id: "c2",
      from: bob("laptop"), now: t0)
    #expect(sends(candidate).map(\.1) == [caller])
    // A ringing device without a leg has nothing to answer or trickle.
    #expect(code(earlyAnswer(&router, from: "phone")) == .invalidState)
    let stray = router.handle(
      .candidate(.init(callId: "call-1", candidate: IceCandidate(candidate: "candidate:3"))), id: "c3",
      from: bob("phone"), now: t0)
    #expect(code(stray) == .invalidState)
  }

  @Test func anAcceptWithoutSDPOnAnAnsweredLegWinsAndEndsTheOtherDevices() {
    var router = ringingCall()
    _ = askForLeg(&router, "laptop")
    _ = askForLeg(&router, "phone")
    _ = legOffer(&router, to: "laptop")
    // Not answered yet: the accept needs the invite's answer, and the call rings on.
    let early = router.handle(.accept(.init(callId: "call-1")), id: "x", from: bob("laptop"), now: t0)
    #expect(code(early) == .badRequest)
    #expect(router.calls["call-1"]?.isRinging == true)
    _ = earlyAnswer(&router, from: "laptop")
    let accepted = router.handle(.accept(.init(callId: "call-1")), id: "y", from: bob("laptop"), now: t0)
    let relayed = sends(accepted)
    guard case .accept(let accept) = relayed.first?.0 else {
      Issue.record("the accept was not relayed")
      return
    }
    #expect(accept.preconnected && accept.answer == nil && accept.from.deviceId == "laptop")
    #expect(
      relayed.contains {
        $0.0.endReason == .answeredElsewhere && $0.1 == .user(userId: "bob", exceptDevice: "laptop")
      })
    #expect(router.calls["call-1"]?.answeringDevice == "laptop")
    // From now on `toDevice` may only name the answering device.
    #expect(sends(legOffer(&router, to: "laptop")).map(\.1) == [.device(userId: "bob", deviceId: "laptop")])
    #expect(code(legOffer(&router, to: "phone")) == .invalidState)
    #expect(code(earlyAnswer(&router, from: "phone")) == .invalidState)
  }

  @Test func aLegDeviceMayStillAcceptWithTheInvitesAnswer() {
    var router = ringingCall()
    _ = askForLeg(&router, "laptop")
    _ = legOffer(&router, to: "laptop")
    _ = earlyAnswer(&router, from: "laptop")
    let accepted = router.handle(
      .accept(.init(callId: "call-1", answer: SessionDescription(sdp: "v=0 answer"))), id: "y", from: bob("laptop"),
      now: t0)
    guard case .accept(let accept) = sends(accepted).first?.0 else {
      Issue.record("the accept was not relayed")
      return
    }
    #expect(!accept.preconnected && accept.answer?.sdp == "v=0 answer")
    // The leg is gone: caller signaling still in flight for it is acknowledged and dropped,
    // never relayed to the connection that carries the call.
    let late = legOffer(&router, to: "laptop")
    #expect(code(late) == nil && sends(late).isEmpty)
    let candidate = router.handle(
      .candidate(.init(callId: "call-1", candidate: IceCandidate(candidate: "leg-late"), toDevice: "laptop")),
      id: "c", from: alice, now: t0)
    #expect(code(candidate) == nil && sends(candidate).isEmpty)
  }

  @Test func legsAreCappedPerCallAndADeviceWithALegMayAskAgain() {
    var router = ringingCall()
    let devices = (1...ProtocolDefaults.maxPreconnectLegs).map { "device-\($0)" }
    for device in devices {
      guard case .ringing(let r) = sends(askForLeg(&router, device)).first?.0 else { return }
      #expect(r.preconnect)
    }
    guard case .ringing(let over) = sends(askForLeg(&router, "one-too-many")).first?.0 else { return }
    #expect(!over.preconnect)
    #expect(code(legOffer(&router, to: "one-too-many")) == .invalidState)
    guard case .ringing(let again) = sends(askForLeg(&router, devices[0])).first?.0 else { return }
    #expect(again.preconnect)
  }

  @Test func aNewSessionOfALegDeviceLosesItsLegAndAnOfferReopensIt() {
    var router = ringingCall()
    _ = askForLeg(&router, "laptop")
    _ = legOffer(&router, to: "laptop")
    _ = earlyAnswer(&router, from: "laptop")
    _ = router.deviceConnected(bob("laptop"), newSession: true, now: t0)
    #expect(code(legOffer(&router, to: "laptop")) == .invalidState)
    let accept = router.handle(.accept(.init(callId: "call-1")), id: "y", from: bob("laptop"), now: t0)
    #expect(code(accept) == .badRequest)
    // Asked again and offered anew: the new leg's answer is awaited before an accept on it.
    _ = askForLeg(&router, "laptop")
    _ = legOffer(&router, to: "laptop")
    _ = earlyAnswer(&router, from: "laptop")
    _ = legOffer(&router, to: "laptop")
    #expect(code(router.handle(.accept(.init(callId: "call-1")), id: "z", from: bob("laptop"), now: t0)) == .badRequest)
  }
}
