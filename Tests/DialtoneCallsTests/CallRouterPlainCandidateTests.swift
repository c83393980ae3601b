import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls

/// `plainCandidateTarget` (the relay's fast lane asks it instead of `handle`) names a device only
/// when `handle` would answer the candidate with a plain ack and relay it to that device alone,
/// changing nothing else: checked for every caller/callee/stranger device and call id after each
/// step of generated call histories (invites with and without pre-connect, legs, accepts,
/// declines, hangups, blocked invites, time passing beyond the ended calls' retention).
struct CallRouterPlainCandidateTests {
  let devices = [
    Identity(userId: "alice", deviceId: "phone", name: "Alice"),
    Identity(userId: "alice", deviceId: "tablet", name: nil),
    Identity(userId: "bob", deviceId: "phone", name: nil),
    Identity(userId: "bob", deviceId: "laptop", name: "B\u{F6}b"),
    Identity(userId: "carol", deviceId: "phone", name: nil),
  ]
  let callIds: [CallID] = ["call-1", "call-2", "call-3"]
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func step(_ g: inout SeededGenerator, _ router: inout CallRouter, now: Date, n: Int) {
    let who = g.pick(devices)
    let callId = g.pick(callIds)
    let to = g.pick(["alice", "bob", "carol"])
    let message: ClientMessage = g.pick([
      .invite(.init(callId: callId, to: to, video: false, offer: SessionDescription(sdp: "v=0"), preconnect: true)),
      .invite(.init(callId: callId, to: to, video: false)),
      .ringing(.init(callId: callId, preconnect: true)),
      .ringing(.init(callId: callId)),
      .offer(.init(callId: callId, sdp: "v=0 leg", toDevice: g.pick(["phone", "laptop"]))),
      .answer(.init(callId: callId, sdp: "v=0 answer")),
      .accept(.init(callId: callId, answer: SessionDescription(sdp: "v=0"))),
      .accept(.init(callId: callId, answer: SessionDescription(sdp: "v=0"))),
      .decline(.init(callId: callId)),
      .hangup(.init(callId: callId)),
      .candidate(.init(callId: callId, candidate: IceCandidate(candidate: "candidate:\(n)"))),
    ])
    let blocked = g.pick([false, false, false, true])
    _ = router.handle(message, id: "s\(n)", from: who, now: now, blocked: blocked)
  }

  @Test func aPlainTargetIsExactlyWhatHandleRelays() {
    var plain = 0
    for seed in 1...16 as ClosedRange<UInt64> { plain += check(seed: seed) }
    #expect(plain > 100, "the histories reached connected calls")
  }

  /// The router's table keeps live and ended calls apart (`CallTable`) and still reads as one:
  /// after every step of generated histories, each id is found or not as a call, a live call only
  /// in the live part, an ended one (until pruned) only in the ended part, and the parts' sizes
  /// are the live and ended calls'.
  @Test func theCallTableKeepsLiveAndEndedCallsApartAndReadsAsOne() {
    var sawEnded = false
    for seed in 1...16 as ClosedRange<UInt64> {
      var g = SeededGenerator(seed: seed)
      var router = CallRouter()
      var now = t0
      for n in 0..<300 {
        step(&g, &router, now: now, n: n)
        if g.pick([false, false, false, false, false, false, false, false, false, true]) {
          now = now.addingTimeInterval(router.settings.endedRetention.seconds / 2 + 1)
        }
        var calls = router.calls
        var live = 0
        var ended = 0
        for id in callIds {
          let call = calls[id]
          #expect(calls.contains(id) == (call != nil))
          #expect(calls.readLive(id) { $0.id } == (call?.isEnded == false ? id : nil))
          if let call { if call.isEnded { ended += 1 } else { live += 1 } }
        }
        #expect(calls.counts.live == live && calls.counts.ended == ended)
        #expect(router.liveCalls.count == live)
        sawEnded = sawEnded || ended > 0
      }
    }
    #expect(sawEnded, "the histories ended calls")
  }

  /// Runs one generated history; returns how many plain targets it checked.
  private func check(seed: UInt64) -> Int {
    var g = SeededGenerator(seed: seed)
    var router = CallRouter()
    var now = t0
    var plain = 0
    for n in 0..<300 {
      step(&g, &router, now: now, n: n)
      if g.pick([false, false, false, false, false, false, false, false, false, true]) {
        now = now.addingTimeInterval(router.settings.endedRetention.seconds / 2 + 1)
      }
      for who in devices {
        for callId in callIds {
          var fast = router
          guard let target = fast.plainCandidateTarget(callId, from: who, now: now) else {
            expectNotPlain(router, callId, who, now: now)
            continue
          }
          plain += 1
          var general = router
          let candidate = IceCandidate(candidate: "candidate:x", sdpMid: "0")
          let outcome = general.handle(
            .candidate(.init(callId: callId, candidate: candidate)), id: "q", from: who, now: now)
          #expect(outcome.reply == .ack(.init(replyTo: "q", callId: callId)))
          #expect(
            outcome.effects == [
              .send(
                .candidate(.init(callId: callId, from: who.peer, candidate: candidate)),
                to: .device(userId: target.userId, deviceId: target.deviceId))
            ])
          #expect(fast.calls.ids.sorted() == general.calls.ids.sorted())
        }
      }
    }
    return plain
  }

  /// The other way round: no target means `handle` does more than relay the candidate to one
  /// device with an ack (the lane is not missed for a candidate it could take).
  private func expectNotPlain(_ router: CallRouter, _ callId: CallID, _ who: Identity, now: Date) {
    var general = router
    let candidate = IceCandidate(candidate: "candidate:y", sdpMid: "0")
    let outcome = general.handle(.candidate(.init(callId: callId, candidate: candidate)), id: "q", from: who, now: now)
    guard outcome.reply == .ack(.init(replyTo: "q", callId: callId)), outcome.effects.count == 1,
      case .send(let message, to: .device) = outcome.effects[0],
      message == .candidate(.init(callId: callId, from: who.peer, candidate: candidate))
    else { return }
    let held = general.calls[callId]?.callerSignals.count != router.calls[callId]?.callerSignals.count
    #expect(held, "a plain relay of \(who.userId)/\(who.deviceId) in \(callId) without a target")
  }
}
