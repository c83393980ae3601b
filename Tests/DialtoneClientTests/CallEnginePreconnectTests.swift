import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneClient

/// Pre-connect while ringing (protocol.md 11) in the engine's machine: legs are made, offered
/// and answered while the call rings with their media held, the accepted leg is adopted with no
/// renegotiation, and every other leg closes.
@Suite struct CallEnginePreconnectTests {
  static let aliceDevice = Peer(userId: "alice", deviceId: "a1")
  static let mainOffer = SessionDescription(sdp: "offer-main")

  static func device(_ name: String) -> Peer { Peer(userId: "bob", deviceId: name) }

  static var preconnecting: CallEngine.Policy {
    var policy = CallEngine.Policy()
    policy.preconnect = true
    return policy
  }

  static func sends(_ effects: [CallEngineMachine.Effect]) -> [ClientMessage] {
    effects.compactMap {
      if case .send(let m) = $0 { return m }
      return nil
    }
  }

  /// A caller whose invite went out (generation 1).
  static func ringingCaller(_ policy: CallEngine.Policy = preconnecting) -> CallEngineMachine {
    var m = CallEngineMachine(
      callId: "c", role: .caller, remoteUserId: "bob", remotePeer: nil, offer: nil, video: false, policy: policy)
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: 1, mainOffer))
    _ = m.handle(.localDescriptionSet(generation: 1))
    return m
  }

  /// The caller's leg for `device` up to its early answer applied; returns its generation.
  static func answeredLeg(_ m: inout CallEngineMachine, _ name: String) -> Int? {
    let made = m.handle(.server(.ringing(.init(callId: "c", from: device(name), preconnect: true))))
    guard case .makeLeg(let gen, .all)? = made.last else { return nil }
    _ = m.handle(.connectionMade(generation: gen, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: gen, SessionDescription(sdp: "offer-\(name)")))
    _ = m.handle(.localDescriptionSet(generation: gen))
    _ = m.handle(.server(.answer(.init(callId: "c", from: device(name), sdp: "early-\(name)"))))
    _ = m.handle(.remoteDescriptionSet(generation: gen))
    return gen
  }

  @Test func theCallerMakesALegPerAskingDeviceAndOffersItToThatDeviceAlone() {
    var m = Self.ringingCaller()
    #expect(m.state == .calling)
    #expect(
      m.handle(.server(.ringing(.init(callId: "c", from: Self.device("laptop"), preconnect: true))))
        == [.makeLeg(generation: 2, .all)])
    #expect(m.state == .ringing && m.generation == 1)
    #expect(
      m.handle(.connectionMade(generation: 2, canRestartIce: true)) == [
        .setVideoDirection(generation: 2, .recvonly), .createOffer(generation: 2, iceRestart: false),
      ])
    let legOffer = SessionDescription(sdp: "offer-laptop")
    #expect(m.handle(.offerCreated(generation: 2, legOffer)) == [.setLocal(generation: 2, legOffer, .offer)])
    // A candidate gathered before the offer left waits for it.
    #expect(m.handle(.localCandidate(generation: 2, IceCandidate(candidate: "l1"))).isEmpty)
    #expect(
      m.handle(.localDescriptionSet(generation: 2)) == [
        .send(.offer(.init(callId: "c", sdp: "offer-laptop", toDevice: "laptop"))),
        .send(.candidate(.init(callId: "c", candidate: IceCandidate(candidate: "l1"), toDevice: "laptop"))),
      ])
    #expect(
      m.handle(.localCandidate(generation: 2, nil)) == [.send(.endOfCandidates(.init(callId: "c", toDevice: "laptop")))]
    )
  }

  @Test func theInviteAsksForPreconnectOnlyWhenThePolicyDoes() {
    for preconnect in [true, false] {
      var policy = CallEngine.Policy()
      policy.preconnect = preconnect
      var m = CallEngineMachine(
        callId: "c", role: .caller, remoteUserId: "bob", remotePeer: nil, offer: nil, video: false, policy: policy)
      _ = m.handle(.start)
      _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
      _ = m.handle(.offerCreated(generation: 1, Self.mainOffer))
      guard case .invite(let invite)? = Self.sends(m.handle(.localDescriptionSet(generation: 1))).first else {
        Issue.record("no invite")
        return
      }
      #expect(invite.preconnect == preconnect)
      // Without it, a device's request for a leg is plain ringing.
      let asked = m.handle(.server(.ringing(.init(callId: "c", from: Self.device("laptop"), preconnect: true))))
      #expect(asked.isEmpty != preconnect)
    }
  }

  @Test func aLegsEarlyAnswerGoesOnItsLegAndItsCandidatesWaitForIt() {
    var m = Self.ringingCaller()
    _ = m.handle(.server(.ringing(.init(callId: "c", from: Self.device("laptop"), preconnect: true))))
    _ = m.handle(.connectionMade(generation: 2, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: 2, SessionDescription(sdp: "offer-laptop")))
    _ = m.handle(.localDescriptionSet(generation: 2))
    let early = SessionDescription(sdp: "early-laptop")
    #expect(
      m.handle(.server(.answer(.init(callId: "c", from: Self.device("laptop"), sdp: early.sdp))))
        == [.setRemote(generation: 2, early, .answer)])
    let remote = IceCandidate(candidate: "r1")
    #expect(m.handle(.server(.candidate(.init(callId: "c", from: Self.device("laptop"), candidate: remote)))).isEmpty)
    #expect(m.handle(.remoteDescriptionSet(generation: 2)) == [.addCandidate(generation: 2, remote)])
    #expect(m.state == .ringing && m.generation == 1)
  }

  @Test func anAcceptOnALegAdoptsItReleasesItsMediaAndClosesTheOthers() {
    var m = Self.ringingCaller()
    guard let laptop = Self.answeredLeg(&m, "laptop"), let tablet = Self.answeredLeg(&m, "tablet") else {
      Issue.record("no legs")
      return
    }
    _ = m.handle(.connectionState(generation: laptop, .connected))
    let effects = m.handle(
      .server(.accept(.init(callId: "c", from: Self.device("laptop"), preconnected: true))))
    #expect(
      effects == [
        .closeLeg(generation: tablet), .adoptLeg(generation: laptop), .releaseMedia(generation: laptop),
        .setAudio(generation: laptop, true), .setVideo(generation: laptop, false),
      ])
    #expect(m.generation == laptop && m.state == .connected && m.remotePeer == Self.device("laptop"))
    // No renegotiation on the answer path, and the call goes on on the leg.
    #expect(!effects.contains { if case .setRemote = $0 { true } else { false } })
    #expect(
      m.handle(.localCandidate(generation: laptop, IceCandidate(candidate: "l9")))
        == [.send(.candidate(.init(callId: "c", candidate: IceCandidate(candidate: "l9"))))])
    #expect(m.handle(.connectionState(generation: 1, .failed)).isEmpty)  // the old main connection
  }

  @Test func anAcceptWithTheMainAnswerClosesEveryLeg() {
    var m = Self.ringingCaller()
    guard let laptop = Self.answeredLeg(&m, "laptop") else { return }
    let answer = SessionDescription(sdp: "answer-main")
    #expect(
      m.handle(.server(.accept(.init(callId: "c", from: Self.device("phone"), answer: answer))))
        == [.closeLeg(generation: laptop), .setRemote(generation: 1, answer, .answer)])
    #expect(m.generation == 1 && m.state == .connecting)
  }

  @Test func aCallerKeepsAtMostFourLegsAndADeviceAskingAgainGetsANewOne() {
    var m = Self.ringingCaller()
    var made: [Int] = []
    for n in 1...5 {
      let effects = m.handle(.server(.ringing(.init(callId: "c", from: Self.device("d\(n)"), preconnect: true))))
      made += effects.compactMap { if case .makeLeg(let gen, _) = $0 { gen } else { nil } }
    }
    #expect(made.count == ProtocolDefaults.maxPreconnectLegs)
    let again = m.handle(.server(.ringing(.init(callId: "c", from: Self.device("d1"), preconnect: true))))
    #expect(again.first == .closeLeg(generation: made[0]))
    #expect(again.count == 2)
  }

  @Test func aFailedLegClosesQuietlyAndHangingUpClosesEveryLeg() {
    var m = Self.ringingCaller()
    guard let laptop = Self.answeredLeg(&m, "laptop"), let tablet = Self.answeredLeg(&m, "tablet") else { return }
    #expect(m.handle(.connectionState(generation: laptop, .failed)) == [.closeLeg(generation: laptop)])
    #expect(m.state == .ringing)
    let ended = m.handle(.hangup)
    #expect(ended.contains(.closeLeg(generation: tablet)) && ended.last == .finish)
    #expect(Self.sends(ended) == [.cancel(.init(callId: "c"))])
  }

  // MARK: The callee

  /// A ringing callee (its main connection, generation 1, applied the invite's offer);
  /// `private`: its legs are relay-only (the default policy); `relay`: a TURN server is among
  /// its ICE servers.
  static func ringingCallee(preconnect: Bool = true, private: Bool = true, relay: Bool = true)
    -> (CallEngineMachine, [CallEngineMachine.Effect])
  {
    var policy = CallEngine.Policy()
    policy.preconnect = preconnect
    policy.privatePreconnect = `private`
    var m = CallEngineMachine(
      callId: "c", role: .callee, remoteUserId: "alice", remotePeer: aliceDevice, offer: mainOffer, video: false,
      policy: policy, relayAvailable: relay)
    let started = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.remoteDescriptionSet(generation: 1))
    return (m, started)
  }

  /// A ringing callee whose leg (generation 2) sent its early answer and, if `connected`,
  /// connected.
  static func calleeWithAnsweredLeg(private: Bool = true, connected: Bool = true) -> CallEngineMachine {
    var (m, _) = ringingCallee(private: `private`)
    _ = m.handle(legOffer())
    _ = m.handle(.connectionMade(generation: 2, canRestartIce: true))
    _ = m.handle(.remoteDescriptionSet(generation: 2))
    _ = m.handle(.answerCreated(generation: 2, SessionDescription(sdp: "early")))
    _ = m.handle(.localDescriptionSet(generation: 2))
    if connected { _ = m.handle(.connectionState(generation: 2, .connected)) }
    return m
  }

  static func legOffer(_ sdp: String = "offer-leg") -> CallEngineMachine.Event {
    .server(.offer(.init(callId: "c", from: aliceDevice, sdp: sdp, leg: true)))
  }

  @Test func theCalleeAsksForALegAnswersItEarlyAndSendsNothingBeforeAnswer() {
    var (m, started) = Self.ringingCallee()
    #expect(started.first == .send(.ringing(.init(callId: "c", preconnect: true))))
    #expect(m.state == .incoming)
    #expect(m.handle(Self.legOffer()) == [.makeLeg(generation: 2, .relay)])
    let offer = SessionDescription(sdp: "offer-leg")
    #expect(
      m.handle(.connectionMade(generation: 2, canRestartIce: true)) == [
        .setVideoDirection(generation: 2, .recvonly), .setRemote(generation: 2, offer, .offer),
      ])
    let legCandidate = IceCandidate(candidate: "leg-1")
    #expect(
      m.handle(.server(.candidate(.init(callId: "c", from: Self.aliceDevice, candidate: legCandidate, leg: true))))
        .isEmpty)
    #expect(
      m.handle(.remoteDescriptionSet(generation: 2)) == [
        .addCandidate(generation: 2, legCandidate), .createAnswer(generation: 2),
      ])
    let early = SessionDescription(sdp: "early")
    #expect(m.handle(.answerCreated(generation: 2, early)) == [.setLocal(generation: 2, early, .answer)])
    #expect(m.handle(.localDescriptionSet(generation: 2)) == [.send(.answer(.init(callId: "c", sdp: "early")))])
    let mine = IceCandidate(candidate: "candidate:1 1 UDP 505413887 203.0.113.9 40000 typ relay")
    #expect(
      m.handle(.localCandidate(generation: 2, mine)) == [.send(.candidate(.init(callId: "c", candidate: mine)))])
    // The invite's own candidates stay on the main connection.
    let mainCandidate = IceCandidate(candidate: "main-1")
    #expect(
      m.handle(.server(.candidate(.init(callId: "c", from: Self.aliceDevice, candidate: mainCandidate))))
        == [.addCandidate(generation: 1, mainCandidate)])
    #expect(m.state == .incoming)

    // Answer: accept first, then media on the leg, which becomes the call's connection.
    _ = m.handle(.connectionState(generation: 2, .connected))
    let accepted = m.handle(.accept)
    #expect(
      accepted == [
        .send(.accept(.init(callId: "c", answer: nil))), .adoptLeg(generation: 2), .releaseMedia(generation: 2),
        .setAudio(generation: 2, true), .setIceTransportPolicy(generation: 2, .all), .setVideo(generation: 2, false),
      ])
    #expect(m.generation == 2 && m.state == .connected)
  }

  @Test func aCalleeWhoseLegIsNotAnsweredYetAcceptsWithTheMainOffer() {
    var (m, _) = Self.ringingCallee()
    _ = m.handle(Self.legOffer())
    let accepted = m.handle(.accept)
    #expect(accepted.first == .closeLeg(generation: 2))
    #expect(accepted.contains(.createAnswer(generation: 1)))
    #expect(m.generation == 1 && m.state == .connecting)
  }

  /// The caller's leg offer crossed the accept (an auto-answering device accepts at once):
  /// it must not be taken for a renegotiation of the call's connection, nor its candidates.
  @Test func legSignalingArrivingAfterAnAcceptOnTheMainOfferIsDropped() {
    var (m, _) = Self.ringingCallee()
    _ = m.handle(.accept)
    #expect(m.generation == 1 && m.state == .connecting)
    #expect(m.handle(Self.legOffer()).isEmpty)
    let late = IceCandidate(candidate: "leg-late")
    #expect(
      m.handle(.server(.candidate(.init(callId: "c", from: Self.aliceDevice, candidate: late, leg: true)))).isEmpty)
    let main = IceCandidate(candidate: "main-1")
    #expect(
      m.handle(.server(.candidate(.init(callId: "c", from: Self.aliceDevice, candidate: main))))
        == [.addCandidate(generation: 1, main)])
  }

  @Test func aLegCandidateStillInFlightAtTheAcceptGoesToTheAdoptedLeg() {
    var m = Self.calleeWithAnsweredLeg()
    _ = m.handle(.accept)
    #expect(m.generation == 2)
    let late = IceCandidate(candidate: "leg-late")
    #expect(
      m.handle(.server(.candidate(.init(callId: "c", from: Self.aliceDevice, candidate: late, leg: true))))
        == [.addCandidate(generation: 2, late)])
    #expect(m.handle(Self.legOffer("offer-again")).isEmpty)
  }

  /// After a server restart the server no longer knows the leg (protocol.md 11) and refuses an
  /// accept without an answer: the callee accepts again, on a fresh connection with the answer
  /// to the invite's offer.
  @Test func anAcceptOnTheLegThatTheServerRefusesIsMadeAgainOnTheInvitesOffer() {
    var m = Self.calleeWithAnsweredLeg()
    _ = m.handle(.accept)
    #expect(m.generation == 2 && m.state == .connected)
    let refused = ServerMessage.error(.init(code: .badRequest, message: "no leg", callId: "c"))
    #expect(m.handle(.server(refused)) == [.replaceConnection(generation: 3)])
    #expect(m.state == .connecting)
    #expect(
      m.handle(.connectionMade(generation: 3, canRestartIce: true)).contains(
        .setRemote(generation: 3, Self.mainOffer, .offer)))
    #expect(m.handle(.remoteDescriptionSet(generation: 3)).contains(.createAnswer(generation: 3)))
    let answer = SessionDescription(sdp: "answer-main")
    _ = m.handle(.answerCreated(generation: 3, answer))
    #expect(
      Self.sends(m.handle(.localDescriptionSet(generation: 3))).first == .accept(.init(callId: "c", answer: answer)))
  }

  @Test func aCalleeWithoutPreconnectRingsAsBeforeAndIgnoresLegOffers() {
    var (m, started) = Self.ringingCallee(preconnect: false)
    #expect(started.first == .send(.ringing(.init(callId: "c"))))
    #expect(m.handle(Self.legOffer()).isEmpty)
  }

  @Test func aCalleeWhoseLegFailsAsksAgainQuietlyAFewTimes() {
    var (m, _) = Self.ringingCallee()
    var generation = 1
    for _ in 0..<PreconnectLegs.retries {
      generation += 1
      _ = m.handle(Self.legOffer())
      #expect(
        m.handle(.connectionState(generation: generation, .failed)) == [
          .closeLeg(generation: generation), .send(.ringing(.init(callId: "c", preconnect: true))),
        ])
      #expect(m.state == .incoming)
    }
    generation += 1
    _ = m.handle(Self.legOffer())
    #expect(m.handle(.connectionState(generation: generation, .failed)) == [.closeLeg(generation: generation)])
    // It still rings, and Answer takes the main offer.
    #expect(m.state == .incoming)
    #expect(m.handle(.accept).contains(.createAnswer(generation: 1)))
  }

  @Test func aNewLegOfferReplacesTheCalleesLeg() {
    var (m, _) = Self.ringingCallee()
    _ = m.handle(Self.legOffer("offer-a"))
    #expect(m.handle(Self.legOffer("offer-b")) == [.closeLeg(generation: 2), .makeLeg(generation: 3, .relay)])
  }

  // MARK: Private legs (the caller learns no address of a callee that has not answered)

  @Test func aCalleesLegIsRelayOnlyUnlessTheAppOptsOut() {
    var (m, _) = Self.ringingCallee()
    #expect(m.handle(Self.legOffer()) == [.makeLeg(generation: 2, .relay)])
    var (open, started) = Self.ringingCallee(private: false, relay: false)
    #expect(started.first == .send(.ringing(.init(callId: "c", preconnect: true))))
    #expect(open.handle(Self.legOffer()) == [.makeLeg(generation: 2, .all)])
    // The caller's own legs gather everything: it placed the call (its main offer's candidates
    // reach every ringing device anyway).
    var caller = Self.ringingCaller()
    #expect(
      caller.handle(.server(.ringing(.init(callId: "c", from: Self.device("laptop"), preconnect: true))))
        == [.makeLeg(generation: 2, .all)])
  }

  // No TURN server, no private leg: the callee asks for none and is negotiated after Answer
  // (never a relay-only leg that cannot connect).
  @Test func aPrivateCalleeWithoutATurnServerAsksForNoLeg() {
    var (m, started) = Self.ringingCallee(relay: false)
    #expect(started.first == .send(.ringing(.init(callId: "c"))))
    #expect(m.handle(Self.legOffer()).isEmpty)
    let accepted = m.handle(.accept)
    #expect(accepted.contains(.createAnswer(generation: 1)))
    #expect(!accepted.contains { if case .closeLeg = $0 { true } else { false } })
  }

  // A private leg whose relay never connected cannot carry the call: Answer drops it and
  // accepts with the answer to the invite's offer. A leg that gathers everything is adopted
  // even before it connects (it will, or the ICE policy restarts it).
  @Test func aPrivateLegNotConnectedByAnswerGivesWayToTheMainOffer() {
    var m = Self.calleeWithAnsweredLeg(connected: false)
    let accepted = m.handle(.accept)
    #expect(accepted.first == .closeLeg(generation: 2))
    #expect(accepted.contains(.createAnswer(generation: 1)))
    #expect(!Self.sends(accepted).contains(.accept(.init(callId: "c", answer: nil))))
    #expect(m.generation == 1 && m.state == .connecting)

    var open = Self.calleeWithAnsweredLeg(private: false, connected: false)
    let adopted = open.handle(.accept)
    #expect(adopted.prefix(2) == [.send(.accept(.init(callId: "c", answer: nil))), .adoptLeg(generation: 2)])
    #expect(open.generation == 2 && open.state == .connecting)
    // Nothing to relax on a leg that gathered everything.
    #expect(!adopted.contains { if case .setIceTransportPolicy = $0 { true } else { false } })
  }

  // What a private leg sends of its candidates: relay ones only, without the related address
  // (libnice writes the device's own address there), whatever the engine gathered.
  @Test func aPrivateLegSendsOnlyRelayCandidatesWithoutTheirRelatedAddress() {
    var m = Self.calleeWithAnsweredLeg(connected: false)
    let relay = IceCandidate(
      candidate: "candidate:7 1 UDP 505413887 203.0.113.9 45750 typ relay raddr 192.168.1.20 rport 35682",
      sdpMid: "0", sdpMLineIndex: 0)
    #expect(
      m.handle(.localCandidate(generation: 2, relay)) == [
        .send(
          .candidate(
            .init(
              callId: "c",
              candidate: IceCandidate(
                candidate: "candidate:7 1 UDP 505413887 203.0.113.9 45750 typ relay raddr 0.0.0.0 rport 0",
                sdpMid: "0", sdpMLineIndex: 0))))
      ])
    let host = IceCandidate(candidate: "candidate:1 1 UDP 2015363327 192.168.1.20 35682 typ host")
    let srflx = IceCandidate(
      candidate: "candidate:3 1 UDP 1686052607 198.51.100.4 35682 typ srflx raddr 192.168.1.20 rport 35682")
    #expect(m.handle(.localCandidate(generation: 2, host)).isEmpty)
    #expect(m.handle(.localCandidate(generation: 2, srflx)).isEmpty)
    #expect(m.handle(.localCandidate(generation: 2, nil)) == [.send(.endOfCandidates(.init(callId: "c")))])
    // A leg that gathers everything sends everything, as gathered.
    var open = Self.calleeWithAnsweredLeg(private: false, connected: false)
    #expect(
      open.handle(.localCandidate(generation: 2, host)) == [.send(.candidate(.init(callId: "c", candidate: host)))])
    #expect(
      PrivateCandidates.relayOnly(IceCandidate(candidate: "a=candidate:9 1 udp 5 203.0.113.9 1 typ relay"))?.candidate
        == "a=candidate:9 1 udp 5 203.0.113.9 1 typ relay")
    #expect(PrivateCandidates.relayOnly(IceCandidate(candidate: "garbage")) == nil)
  }

  @Test func aTurnServerWithCredentialsIsWhatRelaysAPrivateLeg() {
    let turn = IceServer(urls: ["turn:turn.example.com:3478?transport=udp"], username: "1:bob", credential: "c")
    #expect(PreconnectLegs.offersRelay([turn]))
    #expect(
      PreconnectLegs.offersRelay([
        IceServer(urls: ["stun:s.example.com", "TURNS:t.example.com:443"], username: "u", credential: "c")
      ]))
    #expect(!PreconnectLegs.offersRelay([]))
    #expect(
      !PreconnectLegs.offersRelay([IceServer(urls: ["stun:turn.example.com:3478"], username: "u", credential: "c")]))
    #expect(!PreconnectLegs.offersRelay([IceServer(urls: ["turn:turn.example.com:3478"])]))
  }
}
