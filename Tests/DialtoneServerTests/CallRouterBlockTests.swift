import DialtoneCalls
import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer

/// A call whose callee blocks its caller, in the state machine alone: it exists for the caller
/// as a call nobody answers, and nothing of it reaches the callee, now or after a restart.
struct CallRouterBlockTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)
  let offer = SessionDescription(sdp: "v=0 offer")
  let answer = SessionDescription(sdp: "v=0 answer")

  private func reachesBob(_ effects: [CallEffect]) -> Bool {
    effects.contains {
      switch $0 {
      case .send(_, .user("bob", _)), .send(_, .device("bob", _)), .external: return true
      default: return false
      }
    }
  }

  private func invite(_ router: inout CallRouter, blocked: Bool) -> CallRouter.Outcome {
    router.handle(
      .invite(.init(callId: "c1", to: "bob", video: false, offer: offer)), id: "i", from: alice, now: t0,
      blocked: blocked)
  }

  @Test func aBlockedInviteIsAcknowledgedButRingsNobodyAndPushesNothing() throws {
    var router = CallRouter()
    let invited = invite(&router, blocked: true)
    #expect(invited.reply.isAck)
    #expect(!reachesBob(invited.effects))
    #expect(invited.effects.contains { if case .schedule(_, _) = $0 { true } else { false } })
    let trickled = router.handle(
      .candidate(.init(callId: "c1", candidate: IceCandidate(candidate: "candidate:1", sdpMid: "0", sdpMLineIndex: 0))),
      id: "k", from: alice, now: t0)
    #expect(trickled.reply.isAck && !reachesBob(trickled.effects))

    // Bob's devices cannot see, ring, accept or decline it: for them it does not exist.
    for message: ClientMessage in [
      .ringing(.init(callId: "c1")), .accept(.init(callId: "c1", answer: answer)), .decline(.init(callId: "c1")),
      .getCall(.init(callId: "c1")),
    ] {
      let refused = router.handle(message, id: "b", from: bob, now: t0)
      #expect(refused.reply.errorCode == .notFound)
      #expect(refused.effects.isEmpty)
    }

    // Bob is not busy because of it: Carol's call rings him.
    let carol = Identity(userId: "carol", deviceId: "phone", name: nil)
    let other = router.handle(
      .invite(.init(callId: "c2", to: "bob", video: false, offer: offer)), id: "j", from: carol, now: t0)
    #expect(reachesBob(other.effects))

    // The ring timeout ends it as missed for Alice alone: no missed-call push for Bob.
    let missed = router.timerFired(CallTimer(callId: "c1", kind: .ring), now: t0.addingTimeInterval(45))
    #expect(!reachesBob(missed))
    let ended = missed.compactMap { effect -> EndReason? in
      if case .send(.callEnded(let m), .device("alice", "phone")) = effect { return m.reason }
      return nil
    }
    #expect(ended == [.missed])
    let stored = missed.compactMap { effect -> Bool? in
      if case .persist(.ended(_, _, let blocked)) = effect { return blocked }
      return nil
    }
    #expect(stored == [true])
  }

  @Test func aBlockedCallStaysSilentAfterARestart() throws {
    var router = CallRouter()
    let invited = invite(&router, blocked: true)
    let snapshot = try #require(
      invited.effects.compactMap { effect -> LiveCallSnapshot? in
        if case .persist(.put(let s)) = effect { return s }
        return nil
      }.first)
    #expect(snapshot.blocked)

    var restarted = CallRouter()
    let effects = restarted.restore(
      [StoredLiveCall(snapshot: snapshot, callerSignals: [])], now: t0.addingTimeInterval(5))
    #expect(!reachesBob(effects))
    #expect(restarted.handle(.getCall(.init(callId: "c1")), id: "g", from: bob, now: t0).reply.errorCode == .notFound)
    let missed = restarted.timerFired(CallTimer(callId: "c1", kind: .ring), now: t0.addingTimeInterval(45))
    #expect(!reachesBob(missed))
  }

  @Test func withoutABlockTheSameInviteRingsAndPushes() {
    var router = CallRouter()
    #expect(reachesBob(invite(&router, blocked: false).effects))
  }
}
