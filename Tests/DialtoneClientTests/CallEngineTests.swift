import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let alice = Peer(userId: "alice", deviceId: "a1")
private let bob = Peer(userId: "bob", deviceId: "b1")

private struct EngineHarness {
  let log = EngineLog()
  let clock = ManualClock()
  let factory: EngineFakePeerConnectionFactory
  let signaling: EngineFakeSignaling

  init(canRestartIce: Bool = true) {
    factory = EngineFakePeerConnectionFactory(log: log, canRestartIce: canRestartIce)
    signaling = EngineFakeSignaling(log: log)
  }

  func caller(callId: CallID = "call-1") -> CallEngine {
    CallEngine(
      outgoingCallId: callId, to: "bob", video: false, iceServers: [],
      factory: factory, signaling: signaling, clock: clock)
  }

  func callee(offer: Bool = true) -> CallEngine {
    let invite = ServerMessage.Invite(
      callId: "call-1", from: alice, video: false,
      offer: offer ? SessionDescription(sdp: "offer-alice") : nil, createdAt: 0)
    return CallEngine(incoming: invite, iceServers: [], factory: factory, signaling: signaling, clock: clock)
  }

  var pc1: EngineFakePeerConnection { factory.connections[0] }
  var sig: [String] { log.all.filter { $0.hasPrefix("sig.") } }
  func has(_ entry: String) -> Bool { log.all.contains(entry) }
  func count(_ entry: String) -> Int { log.all.filter { $0 == entry }.count }

  /// A caller whose call is accepted and connected.
  func connectedCaller() async -> CallEngine {
    let e = caller()
    await e.start()
    await e.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    pc1.emitState(.connected)
    _ = await eventually { await e.state == .connected }
    return e
  }

  /// A callee that accepted and is connected.
  func connectedCallee() async -> CallEngine {
    let e = callee()
    await e.start()
    await e.accept()
    pc1.emitState(.connected)
    _ = await eventually { await e.state == .connected }
    return e
  }

  /// Waits until exactly these timers (relative to now) are pending.
  func timers(_ expected: [Double]) async -> Bool {
    await eventually {
      let now = clock.elapsedSeconds
      return clock.pendingDeadlines.map { ($0 - now * 1).rounded(toPlaces: 3) } == expected
    }
  }
}

extension Double {
  fileprivate func rounded(toPlaces p: Int) -> Double {
    let m = pow(10, Double(p))
    return (self * m).rounded() / m
  }
}

@Suite("CallEngine")
struct CallEngineTests {
  @Test func offerGoesOutRightAfterSetLocalDescription() async {
    let h = EngineHarness()
    let e = h.caller()
    await e.start()
    #expect(await eventually { h.sig.count == 1 })
    let relevant = h.log.all.filter { $0.contains("Offer") || $0.contains("setLocal") || $0.hasPrefix("sig.") }
    #expect(relevant == ["pc1.createOffer(iceRestart: false)", "pc1.setLocal(offer)", "sig.invite(bob,offer-pc1-1)"])
    #expect(await e.state == .calling)
  }

  /// The app's log hears each state change with the call's id, and none of the SDP.
  @Test func theAppsLogHearsEachStateWithTheCallId() async {
    let h = EngineHarness()
    let entries = RecentLogEntries()
    let e = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [], factory: h.factory, signaling: h.signaling,
      clock: h.clock, log: Log(level: .info, subsystem: "", sink: entries))
    await e.start()
    await e.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    h.pc1.emitState(.connected)
    _ = await eventually { await e.state == .connected }
    let said = entries.entries
    #expect(
      said.map(\.message) == ["caller idle → calling", "caller calling → connecting", "caller connecting → connected"])
    #expect(said.allSatisfy { $0.callId == "call-1" && $0.component == "call" })
    #expect(!said.contains { $0.message.contains("answer-bob") || $0.message.contains("offer-pc1") })
  }
  @Test func localCandidatesTrickleOneByOne() async {
    let h = EngineHarness()
    let e = h.caller()
    await e.start()
    h.pc1.emitCandidate(IceCandidate(candidate: "c1"))
    #expect(await eventually { h.has("sig.candidate(c1)") })
    #expect(h.sig == ["sig.invite(bob,offer-pc1-1)", "sig.candidate(c1)"])  // c1 went out alone
    h.pc1.emitCandidate(IceCandidate(candidate: "c2"))
    h.pc1.emitCandidate(nil)
    #expect(await eventually { h.sig.count == 4 })
    #expect(h.sig == ["sig.invite(bob,offer-pc1-1)", "sig.candidate(c1)", "sig.candidate(c2)", "sig.endOfCandidates"])
  }

  @Test func earlyRemoteCandidatesAreBufferedThenFlushedInOrder() async {
    let h = EngineHarness()
    let e = h.caller()
    await e.start()
    for c in ["r1", "r2", "r3"] {
      await e.handle(.candidate(.init(callId: "call-1", from: bob, candidate: IceCandidate(candidate: c))))
    }
    #expect(!h.pc1.calls.contains { $0.hasPrefix("addCandidate") })
    await e.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    await e.handle(.candidate(.init(callId: "call-1", from: bob, candidate: IceCandidate(candidate: "r4"))))
    let tail = h.pc1.calls.filter { $0.hasPrefix("setRemote") || $0.hasPrefix("addCandidate") }
    #expect(
      tail == [
        "setRemote(answer:answer-bob)", "addCandidate(r1)", "addCandidate(r2)", "addCandidate(r3)", "addCandidate(r4)",
      ])
  }

  @Test func withoutTrickleTheOfferWaitsForGatheringAndCarriesTheCandidates() async {
    let h = EngineHarness()
    var policy = CallEngine.Policy()
    policy.trickle = false
    let e = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [],
      factory: h.factory, signaling: h.signaling, clock: h.clock, policy: policy)
    let started = Task { await e.start() }
    #expect(await eventually { h.factory.connections.first?.calls.contains("setLocal(offer)") == true })
    h.pc1.emitCandidate(IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 5000 typ host", sdpMLineIndex: 0))
    await engineSettle()
    #expect(h.sig.isEmpty)  // still gathering: nothing sent
    h.pc1.emitCandidate(nil)
    await started.value
    #expect(await eventually { h.sig.count == 1 })
    #expect(h.sig.first?.hasPrefix("sig.invite(bob,") == true)
    #expect(!h.sig.contains { $0.hasPrefix("sig.candidate") || $0 == "sig.endOfCandidates" })
  }

  @Test func withoutTrickleGatheringThatNeverEndsTimesOut() async {
    let h = EngineHarness()
    var policy = CallEngine.Policy()
    policy.trickle = false
    policy.gatheringTimeout = .seconds(5)
    let e = CallEngine(
      outgoingCallId: "call-1", to: "bob", video: false, iceServers: [],
      factory: h.factory, signaling: h.signaling, clock: h.clock, policy: policy)
    let started = Task { await e.start() }
    #expect(await h.timers([5]))
    h.clock.advance(by: 5)
    await started.value
    #expect(await eventually { h.sig.count == 1 })
  }

  @Test func calleeRingsBeforeItsPeerConnectionIsBuilt() async {
    let log = EngineLog()
    let factory = GatedFactory(inner: EngineFakePeerConnectionFactory(log: log))
    let signaling = EngineFakeSignaling(log: log)
    let invite = ServerMessage.Invite(
      callId: "call-1", from: alice, video: false,
      offer: SessionDescription(sdp: "offer-alice"), createdAt: 0)
    let e = CallEngine(
      incoming: invite, iceServers: [], factory: factory, signaling: signaling, clock: ManualClock())
    let started = Task { await e.start() }
    // The peer connection is still being built (a webrtcbin pipeline takes tens of ms)...
    #expect(await eventually { signaling.requests == [.ringing(.init(callId: "call-1"))] })
    #expect(factory.inner.connections.isEmpty)
    // ...and the offer is applied once it exists.
    factory.open()
    await started.value
    #expect(factory.inner.connections.first?.calls.contains("setRemote(offer:offer-alice)") == true)
    #expect(await e.state == .incoming)
  }

  // A very fast Answer (CallKit answering a pushed call while the engine still builds its
  // peer connection): the accept is not dropped, and the answer follows the connection.
  @Test func anAnswerWhileThePeerConnectionIsBuiltIsNotDropped() async {
    let log = EngineLog()
    let factory = GatedFactory(inner: EngineFakePeerConnectionFactory(log: log))
    let signaling = EngineFakeSignaling(log: log)
    let invite = ServerMessage.Invite(
      callId: "call-1", from: alice, video: false, offer: SessionDescription(sdp: "offer-alice"), createdAt: 0)
    let e = CallEngine(incoming: invite, iceServers: [], factory: factory, signaling: signaling, clock: ManualClock())
    let started = Task { await e.start() }
    #expect(await eventually { signaling.requests == [.ringing(.init(callId: "call-1"))] })
    let accepted = Task { await e.accept() }
    #expect(await eventually { await e.state == .connecting })
    factory.open()
    await started.value
    await accepted.value
    #expect(
      await eventually {
        signaling.requests.contains(.accept(.init(callId: "call-1", answer: SessionDescription(sdp: "answer-pc1"))))
      })
  }

  @Test func calleeBuffersCandidatesThatArriveBeforeTheOfferIsApplied() async {
    let h = EngineHarness()
    let e = h.callee()
    await e.handle(.candidate(.init(callId: "call-1", from: alice, candidate: IceCandidate(candidate: "a1"))))
    await e.handle(.candidate(.init(callId: "call-1", from: alice, candidate: IceCandidate(candidate: "a2"))))
    await e.start()
    let tail = h.pc1.calls.filter { $0.hasPrefix("setRemote") || $0.hasPrefix("addCandidate") }
    #expect(tail == ["setRemote(offer:offer-alice)", "addCandidate(a1)", "addCandidate(a2)"])
    #expect(await e.state == .incoming)
    await e.accept()
    #expect(await eventually { h.has("sig.accept(answer-pc1)") })
    #expect(h.sig == ["sig.ringing", "sig.accept(answer-pc1)"])
    #expect(h.pc1.calls.suffix(2) == ["createAnswer", "setLocal(answer)"])
  }

  @Test func disconnectedWaitsFourSecondsThenRestarts() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    h.pc1.emitState(.disconnected)
    #expect(await h.timers([4]))
    #expect(await e.state == .reconnecting(attempt: 0))
    h.clock.advance(by: 3.9)
    await engineSettle()
    #expect(!h.has("pc1.createOffer(iceRestart: true)"))
    h.clock.advance(by: 0.1)
    #expect(await eventually { h.has("sig.offer(offer-pc1-2,restart:true)") })
    #expect(await e.state == .reconnecting(attempt: 1))
    // Recovery resets the policy.
    await e.handle(.answer(.init(callId: "call-1", from: bob, sdp: "answer-bob-2")))
    h.pc1.emitState(.connected)
    #expect(await eventually { await e.state == .connected })
    #expect(await h.timers([]))
  }

  @Test func disconnectedThatRecoversByItselfDoesNotRestart() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    h.pc1.emitState(.disconnected)
    #expect(await h.timers([4]))
    h.pc1.emitState(.connected)
    #expect(await eventually { await e.state == .connected })
    #expect(await h.timers([]))
    h.clock.advance(by: 10)
    await engineSettle()
    #expect(!h.has("pc1.createOffer(iceRestart: true)"))
  }

  @Test func failedRestartsAtOnce() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    h.pc1.emitState(.failed)
    #expect(await eventually { h.has("sig.offer(offer-pc1-2,restart:true)") })
    #expect(h.clock.elapsedSeconds == 0)
    let order = h.log.all.filter {
      $0.contains("iceRestart: true") || $0.contains("setLocal") || $0.contains("restart:true")
    }
    #expect(
      order.suffix(3) == [
        "pc1.createOffer(iceRestart: true)", "pc1.setLocal(offer)", "sig.offer(offer-pc1-2,restart:true)",
      ])
    #expect(await e.state == .reconnecting(attempt: 1))
  }

  @Test func restartsBackOffOneTwoThreeSecondsThenTheCallFails() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    let states = Task {
      var seen: [CallEngine.State] = []
      for await s in e.states { seen.append(s) }
      return seen
    }
    h.pc1.emitState(.failed)
    #expect(await eventually { h.count("pc1.createOffer(iceRestart: true)") == 1 })
    for (i, delay) in [1.0, 2.0, 3.0].enumerated() {
      h.pc1.emitState(.failed)  // restart i+1 failed
      #expect(await h.timers([delay]))
      h.clock.advance(by: delay - 0.1)
      await engineSettle()
      #expect(h.count("pc1.createOffer(iceRestart: true)") == i + 1)
      h.clock.advance(by: 0.1)
      #expect(await eventually { h.count("pc1.createOffer(iceRestart: true)") == i + 2 })
    }
    h.pc1.emitState(.failed)  // the last retry failed
    #expect(await eventually { await e.state == .ended(.iceFailed) })
    #expect(await eventually { h.sig.last == "sig.hangup" })
    #expect(h.count("pc1.createOffer(iceRestart: true)") == 4)
    #expect(await eventually { h.has("pc1.close") })
    let seen = await states.value
    #expect(
      seen.suffix(5) == [
        .reconnecting(attempt: 1), .reconnecting(attempt: 2), .reconnecting(attempt: 3),
        .reconnecting(attempt: 4), .ended(.iceFailed),
      ])
  }

  @Test func restartThatNeverConnectsTimesOut() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    h.pc1.emitState(.failed)
    #expect(await h.timers([10]))
    h.clock.advance(by: 10)
    #expect(await h.timers([1]))
    h.clock.advance(by: 1)
    #expect(await eventually { await e.state == .reconnecting(attempt: 2) })
  }

  @Test func answererAsksTheOffererToRestart() async {
    let h = EngineHarness()
    let e = await h.connectedCallee()
    h.pc1.emitState(.failed)
    #expect(await eventually { h.has("sig.iceRestartRequest") })
    #expect(!h.pc1.calls.contains { $0.hasPrefix("createOffer") })
    // The offerer restarts; the answerer answers on the same connection.
    await e.handle(.candidate(.init(callId: "call-1", from: alice, candidate: IceCandidate(candidate: "early"))))
    await e.handle(.offer(.init(callId: "call-1", from: alice, sdp: "offer-alice-2", iceRestart: true)))
    #expect(await eventually { h.has("sig.answer(answer-pc1)") })
    #expect(
      h.pc1.calls.suffix(4) == [
        "setRemote(offer:offer-alice-2)", "videoDirection(recvonly)", "createAnswer", "setLocal(answer)",
      ])
    h.pc1.emitState(.connected)
    #expect(await eventually { await e.state == .connected })
  }

  @Test func offererHonoursIceRestartRequest() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    await e.handle(.iceRestartRequest(.init(callId: "call-1", from: bob)))
    #expect(await eventually { h.has("sig.offer(offer-pc1-2,restart:true)") })
  }

  @Test func nonRestartableConnectionIsReplacedWithAFreshOne() async {
    let h = EngineHarness(canRestartIce: false)
    let e = await h.connectedCaller()
    h.pc1.emitState(.failed)
    #expect(await eventually { h.has("sig.offer(offer-pc2-1,restart:true)") })
    let log = h.log.all
    let make = log.firstIndex(of: "factory.make(pc2)") ?? -1
    let close = log.firstIndex(of: "pc1.close") ?? -1
    // The candidate listener is detached before close; the state listener delivered the
    // `failed` that triggered this, so it is cut off by generation and ends right after.
    #expect((log.firstIndex(of: "pc1.candidates.detached") ?? Int.max) < close)
    #expect((log.firstIndex(of: "pc1.data.detached") ?? Int.max) < close)
    #expect(close < make)
    #expect(!h.has("pc1.createOffer(iceRestart: true)"))
    let pc2 = h.factory.connections[1]
    #expect(pc2.calls.contains("createOffer(iceRestart: false)"))
    #expect(pc2.calls.contains("audio(true)"))
    // The old connection's close-time events were ignored; the new one trickles and connects.
    #expect(!h.has("sig.candidate(after-close)"))
    await e.handle(.candidate(.init(callId: "call-1", from: bob, candidate: IceCandidate(candidate: "b9"))))
    await e.handle(.answer(.init(callId: "call-1", from: bob, sdp: "answer-bob-2")))
    #expect(pc2.calls.suffix(2) == ["setRemote(answer:answer-bob-2)", "addCandidate(b9)"])
    pc2.emitCandidate(IceCandidate(candidate: "n1"))
    #expect(await eventually { h.has("sig.candidate(n1)") })
    pc2.emitState(.connected)
    #expect(await eventually { await e.state == .connected })
  }

  @Test func glareIsSurfacedWithTheSurvivingCall() async {
    let h = EngineHarness()
    let e = h.caller(callId: "zzz")
    await e.start()
    await e.handle(.callEnded(.init(callId: "zzz", reason: .glare, replacedBy: "aaa")))
    #expect(await e.state == .ended(.glare(replacedBy: "aaa")))
    #expect(await e.state.glareSurvivor == "aaa")
    await e.drainSignaling()
    #expect(h.sig == ["sig.invite(bob,offer-pc1-1)"])  // no cancel: the server already ended it
    #expect(h.has("pc1.close"))
  }

  @Test func messagesForOtherCallsAreIgnored() async {
    let h = EngineHarness()
    let e = h.caller()
    await e.start()
    await e.handle(.callEnded(.init(callId: "other", reason: .hangup)))
    await e.handle(.ringing(.init(callId: "other", from: bob)))
    #expect(await e.state == .calling)
  }

  @Test func teardownDetachesBeforeClosingAndIgnoresLaterEvents() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    await e.hangup()
    #expect(await e.state == .ended(.local))
    await e.drainSignaling()
    let log = h.log.all
    let close = log.firstIndex(of: "pc1.close")!
    #expect(log.firstIndex(of: "pc1.states.detached")! < close)
    #expect(log.firstIndex(of: "pc1.candidates.detached")! < close)
    #expect(log.firstIndex(of: "pc1.data.detached")! < close)
    #expect(h.sig.last == "sig.hangup")
    // close() emitted closed/failed/candidate; a late server message arrives too: all ignored.
    await e.handle(.candidate(.init(callId: "call-1", from: bob, candidate: IceCandidate(candidate: "late"))))
    await e.handle(.offer(.init(callId: "call-1", from: bob, sdp: "x", iceRestart: true)))
    await engineSettle()
    #expect(await e.state == .ended(.local))
    #expect(!h.has("sig.candidate(after-close)"))
    #expect(!h.has("pc1.addCandidate(late)"))
    #expect(h.count("pc1.close") == 1)
    #expect(h.factory.connections.count == 1)
    #expect(h.clock.pendingDeadlines.isEmpty)
  }

  @Test func hangupBeforeAcceptCancelsOrDeclines() async {
    let h = EngineHarness()
    let caller = h.caller()
    await caller.start()
    await caller.hangup()
    await caller.drainSignaling()
    #expect(h.sig.last == "sig.cancel")
    let h2 = EngineHarness()
    let callee = h2.callee()
    await callee.start()
    await callee.hangup()
    await callee.drainSignaling()
    #expect(h2.sig.last == "sig.decline")
  }

  @Test func statesArePublishedInOrder() async {
    let h = EngineHarness()
    let e = h.caller()
    let states = Task {
      var seen: [CallEngine.State] = []
      for await s in e.states { seen.append(s) }
      return seen
    }
    await e.start()
    await e.handle(.ringing(.init(callId: "call-1", from: bob)))
    await e.handle(.accept(.init(callId: "call-1", from: bob, answer: SessionDescription(sdp: "answer-bob"))))
    h.pc1.emitState(.checking)
    h.pc1.emitState(.connected)
    #expect(await eventually { await e.state == .connected })
    await e.handle(.callEnded(.init(callId: "call-1", reason: .hangup, from: bob)))
    #expect(await states.value == [.idle, .calling, .ringing, .connecting, .connected, .ended(.remote(.hangup))])
    #expect(await e.remotePeer == bob)
  }

  @Test func muteHoldAndVideo() async {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    await e.setMuted(true)
    await e.setOnHold(true)
    await e.setMuted(false)  // still held: audio stays off
    await e.setOnHold(false)
    // An audio call upgraded to video: the offer goes out at once, the camera opens with the answer.
    await e.setSendsVideo(true)
    #expect(await eventually { h.has("sig.offer(offer-pc1-2,restart:false)") })
    #expect(
      h.pc1.calls.filter { $0.hasPrefix("audio") || $0.hasPrefix("video") }
        == [
          "audio(true)", "videoDirection(recvonly)", "video(false)", "audio(false)", "audio(false)", "audio(false)",
          "audio(true)", "videoDirection(sendrecv)",
        ])
    await e.handle(.answer(.init(callId: "call-1", from: bob, sdp: "answer-bob-2")))
    #expect(await eventually { h.pc1.calls.last == "video(true)" })
    #expect(h.pc1.calls.suffix(3) == ["setLocal(offer)", "setRemote(answer:answer-bob-2)", "video(true)"])
    #expect(await e.isVideoEnabled)
    #expect(await e.sendsVideo)
    #expect(await e.hasVideo)
    #expect(await e.stats() == PeerConnectionStats(bytesSent: 1, bytesReceived: 2))
  }

  @Test func dataChannelPassesThroughAndStopsAtTeardown() async throws {
    let h = EngineHarness()
    let e = await h.connectedCaller()
    let received = Task {
      var all: [String] = []
      for await d in e.dataMessages { all.append(String(decoding: d, as: UTF8.self)) }
      return all
    }
    try await e.sendData(Data("hi".utf8))
    #expect(h.pc1.calls.last == "sendData(2)")
    h.pc1.emitData(Data("hello".utf8))
    #expect(await eventually { h.log.all.contains("pc1.audio(true)") })
    await engineSettle()
    await e.hangup()
    #expect(await received.value == ["hello"])  // not "after-close"
    await #expect(throws: CallEngineError.notActive) { try await e.sendData(Data()) }
  }
}

/// A factory that holds every request until `open()`.
private final class GatedFactory: PeerConnectionFactory, Sendable {
  let inner: EngineFakePeerConnectionFactory
  private let gate = TestGate()

  init(inner: EngineFakePeerConnectionFactory) { self.inner = inner }

  func open() { gate.open() }

  func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    await gate.wait()
    return try await inner.makePeerConnection(configuration)
  }
}
