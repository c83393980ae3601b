import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

extension CallRouter {
  /// A whole frame in, as the hub hands its parts over.
  mutating func handle(_ frame: ClientEnvelope, from who: Identity, now: Date) -> Outcome {
    handle(frame.message, id: frame.id ?? "", from: who, now: now)
  }
}

/// The state machine alone: inputs in, reply and effects out, with virtual time.
struct CallRouterTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bobPhone = Identity(userId: "bob", deviceId: "phone", name: nil)
  let bobLaptop = Identity(userId: "bob", deviceId: "laptop", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func records(_ effects: [CallEffect]) -> [CallRecord] {
    effects.compactMap {
      if case .external(.ended(let r)) = $0 { return r }
      return nil
    }
  }

  private func ringing(_ router: inout CallRouter, _ callId: CallID = "call-1") -> [CallEffect] {
    router.handle(
      ClientEnvelope(id: "i1", message: .invite(.init(callId: callId, to: "bob", video: true))), from: alice, now: t0
    ).effects
  }

  @Test func inviteRingsEveryCalleeDeviceSchedulesTheRingTimeoutAndAnnouncesIt() {
    var router = CallRouter()
    let effects = ringing(&router)
    #expect(sends(effects).map(\.1) == [.user(userId: "bob", exceptDevice: nil)])
    #expect(
      effects.contains {
        if case .schedule(let t, .seconds(45)) = $0 { return t.kind == .ring }
        return false
      })
    #expect(
      effects.contains {
        if case .external(.ringing(_, let caller, "bob", true, _)) = $0 { return caller.userId == "alice" }
        return false
      })
  }

  @Test func callerLostWhileRingingEndsTheCallForEveryCalleeDevice() {
    var router = CallRouter()
    _ = ringing(&router)
    let drop = router.deviceDisconnected(alice, now: t0.addingTimeInterval(1))
    guard case .schedule(let timer, .seconds(30)) = drop.first(where: isSchedule) else {
      Issue.record("no grace timer")
      return
    }
    let ended = router.timerFired(timer, now: t0.addingTimeInterval(31))
    let notices = sends(ended)
    #expect(notices.contains { $0.0.endReason == .connectionLost && $0.1 == .user(userId: "bob", exceptDevice: nil) })
    #expect(records(ended).first?.endReason == .connectionLost)
  }

  @Test func reconnectingInTimeCancelsTheGraceTimer() {
    var router = CallRouter()
    _ = ringing(&router)
    _ = router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobPhone, now: t0)
    let drop = router.deviceDisconnected(bobPhone, now: t0)
    guard case .schedule(let timer, _) = drop.first(where: isSchedule) else {
      Issue.record("no grace timer")
      return
    }
    let back = router.deviceConnected(bobPhone, newSession: false, now: t0.addingTimeInterval(10))
    #expect(
      back.contains {
        if case .cancel(let t) = $0 { return t == timer }
        return false
      })
  }

  @Test func recordsCarryAnsweringDeviceAndDuration() {
    var router = CallRouter()
    _ = ringing(&router)
    _ = router.handle(
      ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobLaptop, now: t0.addingTimeInterval(2)
    )
    let hangup = router.handle(
      ClientEnvelope(id: "h", message: .hangup(.init(callId: "call-1"))), from: bobLaptop,
      now: t0.addingTimeInterval(62.5))
    let record = records(hangup.effects).first
    #expect(record?.answeredBy == "laptop")
    #expect(record?.durationMs == 60_500)
    #expect(record?.endReason == .hangup)
    #expect(router.callState("call-1", visibleTo: alice)?.calleeDeviceId == "laptop")
  }

  @Test func endedCallsAreForgottenAfterTheRetention() {
    var router = CallRouter(settings: .init(endedRetention: .seconds(600)))
    _ = ringing(&router)
    _ = router.handle(ClientEnvelope(id: "c", message: .cancel(.init(callId: "call-1"))), from: alice, now: t0)
    #expect(router.callState("call-1", visibleTo: bobPhone)?.endReason == .cancelled)
    _ = router.handle(
      ClientEnvelope(id: "g", message: .getCall(.init(callId: "other"))), from: alice, now: t0.addingTimeInterval(601))
    #expect(router.callState("call-1", visibleTo: bobPhone) == nil)
  }

  @Test func aCallerHasABoundedNumberOfLiveCalls() {
    var router = CallRouter(settings: .init(maxLiveCallsPerUser: 2))
    func invite(_ id: CallID, _ to: String) -> CallRouter.Outcome {
      router.handle(
        ClientEnvelope(id: "i-\(id)", message: .invite(.init(callId: id, to: to, video: false))), from: alice, now: t0)
    }
    #expect(invite("c1", "bob").reply.isAck)
    #expect(invite("c2", "carol").reply.isAck)
    let refused = invite("c3", "dave")
    #expect(refused.reply.errorCode == .limitExceeded && refused.effects.isEmpty)
    // Being called does not count against the limit; ending one of hers frees a place.
    _ = router.handle(ClientEnvelope(id: "x", message: .cancel(.init(callId: "c1"))), from: alice, now: t0)
    #expect(invite("c4", "dave").reply.isAck)
  }

  @Test func signalingBufferedWhileRingingIsBoundedInBytes() {
    var router = CallRouter(settings: .init(maxBufferedSignalBytes: 20_000))
    _ = ringing(&router)
    let big = String(repeating: "a", count: 12_000)
    let first = router.handle(
      ClientEnvelope(id: "o1", message: .offer(.init(callId: "call-1", sdp: big))), from: alice, now: t0)
    #expect(first.reply.isAck)
    let second = router.handle(
      ClientEnvelope(id: "o2", message: .offer(.init(callId: "call-1", sdp: big))), from: alice, now: t0)
    #expect(second.reply.errorCode == .limitExceeded && second.effects.isEmpty)
  }

  @Test func anEndedCallKeepsItsOutcomeButNotItsOffer() throws {
    var router = CallRouter()
    let offer = SessionDescription(sdp: String(repeating: "v=0 ", count: 4_000))
    _ = router.handle(
      ClientEnvelope(id: "i1", message: .invite(.init(callId: "call-1", to: "bob", video: false, offer: offer))),
      from: alice, now: t0)
    _ = router.handle(ClientEnvelope(id: "c", message: .cancel(.init(callId: "call-1"))), from: alice, now: t0)
    let call = try #require(router.calls["call-1"])
    guard case .invite(let kept) = call.inviteMessage else {
      Issue.record("the ended call lost its invite")
      return
    }
    #expect(kept.offer == nil && call.callerSignals.isEmpty)
    #expect(router.callState("call-1", visibleTo: bobPhone)?.endReason == .cancelled)
  }

  @Test func signalingBufferedWhileRingingIsBounded() {
    var router = CallRouter(settings: .init(maxBufferedSignals: 3))
    _ = ringing(&router)
    for n in 0..<3 {
      let ok = router.handle(
        ClientEnvelope(id: "e\(n)", message: .endOfCandidates(.init(callId: "call-1"))), from: alice, now: t0)
      #expect(ok.reply.isAck)
    }
    let refused = router.handle(
      ClientEnvelope(id: "e9", message: .endOfCandidates(.init(callId: "call-1"))), from: alice, now: t0)
    #expect(refused.reply.errorCode == .limitExceeded)
    // The late device gets the invite and the three buffered messages.
    let late = router.deviceConnected(bobPhone, newSession: true, now: t0)
    #expect(sends(late).count == 4)
    // A resumed session already has them in its outbox: nothing is re-sent.
    #expect(sends(router.deviceConnected(bobPhone, newSession: false, now: t0)).isEmpty)
  }

  @Test func mediaStateReachesTheOtherParticipantOnly() {
    var router = CallRouter()
    _ = ringing(&router)
    _ = router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobPhone, now: t0)
    let fromAlice = router.handle(
      ClientEnvelope(id: "m", message: .mediaState(.init(callId: "call-1", camera: false))), from: alice, now: t0)
    #expect(
      sends(fromAlice.effects).map(\.1) == [.device(userId: "bob", deviceId: "phone")]
        && sends(fromAlice.effects).contains {
          if case .mediaState(let m) = $0.0 { return m.camera == false && m.from.userId == "alice" }
          return false
        })
    let fromBob = router.handle(
      ClientEnvelope(id: "n", message: .mediaState(.init(callId: "call-1", camera: true))), from: bobPhone, now: t0)
    #expect(sends(fromBob.effects).map(\.1) == [.device(userId: "alice", deviceId: "phone")])
    // Bob's other device is not in the call.
    let stray = router.handle(
      ClientEnvelope(id: "o", message: .mediaState(.init(callId: "call-1", camera: true))), from: bobLaptop, now: t0)
    if case .error(let e) = stray.reply { #expect(e.code == .invalidState) } else { Issue.record("accepted a stray") }
  }

  @Test func holdReachesTheOtherDeviceOfAnAcceptedCallOnly() {
    var router = CallRouter()
    _ = ringing(&router)
    // While it rings, nobody holds the call.
    let early = router.handle(
      ClientEnvelope(id: "h0", message: .hold(.init(callId: "call-1", onHold: true))), from: alice, now: t0)
    if case .error(let e) = early.reply {
      #expect(e.code == .invalidState)
    } else {
      Issue.record("held a ringing call")
    }
    #expect(sends(early.effects).isEmpty)
    _ = router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobPhone, now: t0)
    let fromAlice = router.handle(
      ClientEnvelope(id: "h1", message: .hold(.init(callId: "call-1", onHold: true))), from: alice, now: t0)
    #expect(fromAlice.reply == .ack(.init(replyTo: "h1", callId: "call-1")))
    #expect(
      sends(fromAlice.effects).map(\.0) == [.hold(.init(callId: "call-1", from: alice.peer, onHold: true))]
        && sends(fromAlice.effects).map(\.1) == [.device(userId: "bob", deviceId: "phone")])
    let fromBob = router.handle(
      ClientEnvelope(id: "h2", message: .hold(.init(callId: "call-1", onHold: false))), from: bobPhone, now: t0)
    #expect(sends(fromBob.effects).map(\.0) == [.hold(.init(callId: "call-1", from: bobPhone.peer, onHold: false))])
    #expect(sends(fromBob.effects).map(\.1) == [.device(userId: "alice", deviceId: "phone")])
    // Bob's other device is not in the call.
    let stray = router.handle(
      ClientEnvelope(id: "h3", message: .hold(.init(callId: "call-1", onHold: true))), from: bobLaptop, now: t0)
    if case .error(let e) = stray.reply { #expect(e.code == .invalidState) } else { Issue.record("accepted a stray") }
    #expect(sends(stray.effects).isEmpty)
  }

  // Once accepted, the callee may renegotiate (video on or off) and the caller answers it; the
  // callee still never restarts ICE, and nobody else takes part.
  @Test func theCalleeRenegotiatesOnceTheCallIsAccepted() {
    var router = CallRouter()
    _ = ringing(&router)
    _ = router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobPhone, now: t0)
    let offer = router.handle(
      ClientEnvelope(id: "o", message: .offer(.init(callId: "call-1", sdp: "v=0"))), from: bobPhone, now: t0)
    #expect(offer.reply.errorCode == nil)
    #expect(sends(offer.effects).map(\.1) == [.device(userId: "alice", deviceId: "phone")])
    let answer = router.handle(
      ClientEnvelope(id: "p", message: .answer(.init(callId: "call-1", sdp: "v=0"))), from: alice, now: t0)
    #expect(answer.reply.errorCode == nil)
    #expect(sends(answer.effects).map(\.1) == [.device(userId: "bob", deviceId: "phone")])
    let restart = router.handle(
      ClientEnvelope(id: "q", message: .offer(.init(callId: "call-1", sdp: "v=0", iceRestart: true))), from: bobPhone,
      now: t0)
    #expect(restart.reply.errorCode == .invalidState)
    let stray = router.handle(
      ClientEnvelope(id: "r", message: .offer(.init(callId: "call-1", sdp: "v=0"))), from: bobLaptop, now: t0)
    #expect(stray.reply.errorCode == .invalidState)
  }

  // protocol.md 7.6: an accept carries the answer exactly when the invite carried an offer.
  @Test func anAcceptMustAnswerTheInvitesOfferExactlyWhenThereIsOne() {
    var router = CallRouter()
    _ = router.handle(
      ClientEnvelope(
        id: "i", message: .invite(.init(callId: "with", to: "bob", video: false, offer: .init(sdp: "v=0")))),
      from: alice, now: t0)
    #expect(
      router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "with"))), from: bobPhone, now: t0).reply
        .errorCode == .badRequest)
    #expect(
      router.handle(
        ClientEnvelope(id: "b", message: .accept(.init(callId: "with", answer: .init(sdp: "v=0")))), from: bobPhone,
        now: t0
      ).reply.errorCode == nil)
    var other = CallRouter()  // bob is now in a call: a new one would be busy
    _ = ringing(&other, "without")
    #expect(
      other.handle(
        ClientEnvelope(id: "c", message: .accept(.init(callId: "without", answer: .init(sdp: "v=0")))),
        from: bobLaptop, now: t0
      ).reply.errorCode == .badRequest)
  }

  // protocol.md 7.7: the accepting device's decline, after accepting, is a hangup.
  @Test func aDeclineFromTheAcceptingDeviceIsAHangup() {
    var router = CallRouter()
    _ = ringing(&router)
    _ = router.handle(ClientEnvelope(id: "a", message: .accept(.init(callId: "call-1"))), from: bobPhone, now: t0)
    let declined = router.handle(
      ClientEnvelope(id: "d", message: .decline(.init(callId: "call-1"))), from: bobPhone, now: t0)
    #expect(declined.reply.errorCode == nil)
    #expect(
      sends(declined.effects).contains {
        if case .callEnded(let m) = $0.0 {
          return m.reason == .hangup && $0.1 == .device(userId: "alice", deviceId: "phone")
        }
        return false
      })
  }

  // While the call rings there is nothing to renegotiate: the callee cannot offer yet.
  @Test func callerCannotAnswerAndCalleeCannotOffer() {
    var router = CallRouter()
    _ = ringing(&router)
    #expect(
      router.handle(ClientEnvelope(id: "x", message: .accept(.init(callId: "call-1"))), from: alice, now: t0).reply
        .errorCode == .invalidState)
    #expect(
      router.handle(
        ClientEnvelope(id: "y", message: .offer(.init(callId: "call-1", sdp: "v=0"))), from: bobPhone, now: t0
      ).reply.errorCode
        == .invalidState)
    #expect(
      router.handle(
        ClientEnvelope(id: "z", message: .iceRestartRequest(.init(callId: "call-1"))), from: bobPhone, now: t0
      ).reply.errorCode
        == .invalidState)
  }
}

private func isSchedule(_ effect: CallEffect) -> Bool {
  if case .schedule = effect { return true }
  return false
}
