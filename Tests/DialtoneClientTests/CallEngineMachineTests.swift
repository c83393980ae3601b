import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let alice = Peer(userId: "alice", deviceId: "a1")
private let bob = Peer(userId: "bob", deviceId: "b1")
private let offer = SessionDescription(sdp: "offer-1")
private let answer = SessionDescription(sdp: "answer-1")

/// These tests are about the flow without pre-connect (9b has CallEnginePreconnectTests).
private let todaysFlow: CallEngine.Policy = {
  var policy = CallEngine.Policy()
  policy.preconnect = false
  return policy
}()

private func caller(_ policy: CallEngine.Policy = todaysFlow, video: Bool = false) -> CallEngineMachine {
  CallEngineMachine(
    callId: "c", role: .caller, remoteUserId: "bob", remotePeer: nil, offer: nil, video: video,
    policy: policy)
}

private func callee(offer: SessionDescription? = SessionDescription(sdp: "offer-alice")) -> CallEngineMachine {
  CallEngineMachine(
    callId: "c", role: .callee, remoteUserId: "alice", remotePeer: alice, offer: offer, video: false,
    policy: todaysFlow)
}

private func candidate(_ name: String) -> ServerMessage {
  .candidate(.init(callId: "c", from: bob, candidate: IceCandidate(candidate: name)))
}

/// The caller's whole set-up, up to a connected call.
func connectedCaller(
  _ policy: CallEngine.Policy = .init(), canRestartIce: Bool = true, video: Bool = false,
  answer: SessionDescription = answer
) -> CallEngineMachine {
  var m = caller(policy, video: video)
  _ = m.handle(.start)
  _ = m.handle(.connectionMade(generation: 1, canRestartIce: canRestartIce))
  _ = m.handle(.offerCreated(generation: 1, offer))
  _ = m.handle(.localDescriptionSet(generation: 1))
  _ = m.handle(.server(.accept(.init(callId: "c", from: bob, answer: answer))))
  _ = m.handle(.remoteDescriptionSet(generation: 1))
  _ = m.handle(.connectionState(generation: 1, .connected))
  return m
}

@Suite struct CallEngineMachineTests {
  // Rule 2: the offer leaves right after setLocalDescription, then candidates one by one.
  @Test func theCallerOffersAndTrickles() {
    var m = caller()
    #expect(m.handle(.start) == [.replaceConnection(generation: 1)])
    #expect(
      m.handle(.connectionMade(generation: 1, canRestartIce: true)) == [
        .setAudio(generation: 1, true), .setVideoDirection(generation: 1, .recvonly),
        .createOffer(generation: 1, iceRestart: false), .setVideo(generation: 1, false),
      ])
    #expect(m.state == .calling)
    #expect(m.handle(.offerCreated(generation: 1, offer)) == [.setLocal(generation: 1, offer, .offer)])
    #expect(
      m.handle(.localDescriptionSet(generation: 1))
        == [.send(.invite(.init(callId: "c", to: "bob", video: false, offer: offer)))])
    #expect(
      m.handle(.localCandidate(generation: 1, IceCandidate(candidate: "l1")))
        == [.send(.candidate(.init(callId: "c", candidate: IceCandidate(candidate: "l1"))))])
    #expect(m.handle(.localCandidate(generation: 1, nil)) == [.send(.endOfCandidates(.init(callId: "c")))])
  }

  // Rule 2: remote candidates before the answer wait, then follow it in order.
  @Test func earlyRemoteCandidatesWaitForTheRemoteDescription() {
    var m = caller()
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(m.handle(.server(candidate("r1"))).isEmpty)
    #expect(
      m.handle(.server(.accept(.init(callId: "c", from: bob, answer: answer))))
        == [.setRemote(generation: 1, answer, .answer)])
    #expect(m.state == .connecting && m.remotePeer == bob)
    #expect(m.handle(.server(candidate("r2"))).isEmpty)  // the description is still being set
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1)) == [
        .addCandidate(generation: 1, IceCandidate(candidate: "r1")),
        .addCandidate(generation: 1, IceCandidate(candidate: "r2")),
      ])
    #expect(m.handle(.server(candidate("r3"))) == [.addCandidate(generation: 1, IceCandidate(candidate: "r3"))])
  }

  // The callee rings before its connection exists, applies the invite's offer, answers on accept.
  @Test func theCalleeRingsAppliesTheOfferAndAnswersOnAccept() {
    var m = callee()
    #expect(m.handle(.server(candidate("a1"))).isEmpty)
    #expect(m.handle(.start) == [.send(.ringing(.init(callId: "c"))), .replaceConnection(generation: 1)])
    // (An accept at this point is kept: CallEngineEarlyAcceptTests.)
    let made = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(made.contains(.setRemote(generation: 1, SessionDescription(sdp: "offer-alice"), .offer)))
    #expect(m.state == .incoming)
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1)) == [.addCandidate(generation: 1, IceCandidate(candidate: "a1"))])
    // An audio call: the answer takes video only if the offer sends it.
    #expect(m.handle(.accept) == [.setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1)])
    #expect(m.state == .connecting)
    #expect(m.handle(.answerCreated(generation: 1, answer)) == [.setLocal(generation: 1, answer, .answer)])
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.accept(.init(callId: "c", answer: answer)))])
  }

  // The agent starts gathering on setLocalDescription: a candidate it finds before the invite
  // (or the accept) is sent waits for it. Sent first, the server would refuse it (a call it does
  // not know yet, a callee device that has not accepted) and the candidate would be lost.
  @Test func candidatesGatheredBeforeTheInviteOrAcceptIsSentFollowIt() {
    var m = caller()
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: 1, offer))
    let early = IceCandidate(candidate: "candidate:1 1 UDP 1 10.0.0.1 5000 typ host")
    #expect(m.handle(.localCandidate(generation: 1, early)).isEmpty)
    let sent = m.handle(.localDescriptionSet(generation: 1))
    #expect(sent.count == 2 && sent.last == .send(.candidate(.init(callId: "c", candidate: early))))
    guard case .send(.invite) = sent.first else {
      Issue.record("the invite is not first: \(sent)")
      return
    }
    let later = IceCandidate(candidate: "candidate:2 1 UDP 1 10.0.0.1 5001 typ host")
    #expect(
      m.handle(.localCandidate(generation: 1, later)) == [.send(.candidate(.init(callId: "c", candidate: later)))])

    var callee = callee()
    _ = callee.handle(.start)
    _ = callee.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = callee.handle(.remoteDescriptionSet(generation: 1))
    _ = callee.handle(.accept)
    _ = callee.handle(.answerCreated(generation: 1, answer))
    #expect(callee.handle(.localCandidate(generation: 1, early)).isEmpty)
    #expect(callee.handle(.localCandidate(generation: 1, nil)).isEmpty)
    #expect(
      callee.handle(.localDescriptionSet(generation: 1)) == [
        .send(.accept(.init(callId: "c", answer: answer))), .send(.candidate(.init(callId: "c", candidate: early))),
        .send(.endOfCandidates(.init(callId: "c"))),
      ])
  }

  // Accepted while the invite's offer is still being applied: the answer follows it, in the
  // accept (protocol.md 7.6: an accept answers the invite's offer whenever there was one).
  @Test func anAcceptBeforeTheOfferIsAppliedWaitsForIt() {
    var m = callee()
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(m.handle(.accept).isEmpty)
    #expect(m.state == .connecting)
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1))
        == [.setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1)])
    _ = m.handle(.answerCreated(generation: 1, answer))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.accept(.init(callId: "c", answer: answer)))])
  }

  // Rule 3: disconnected waits its grace, failed restarts at once, backoff 1-2-3, then the call fails.
  @Test func theIcePolicy() {
    var m = connectedCaller()
    let grace = m.handle(.connectionState(generation: 1, .disconnected))
    #expect(grace == [.arm(.policy(token: 1), after: .seconds(4))])
    #expect(m.state == .reconnecting(attempt: 0))
    #expect(m.handle(.connectionState(generation: 1, .connected)) == [.cancel(.policy(token: 1))])
    #expect(m.handle(.timerFired(.policy(token: 1))).isEmpty)  // a replaced timer does nothing

    #expect(
      m.handle(.connectionState(generation: 1, .failed)) == [
        .arm(.policy(token: 2), after: .seconds(10)), .setVideoDirection(generation: 1, .recvonly),
        .createOffer(generation: 1, iceRestart: true),
      ])
    for (attempt, delay) in [(1, 1.0), (2, 2.0), (3, 3.0)] {
      let token = attempt * 2 + 1
      #expect(
        m.handle(.connectionState(generation: 1, .failed))
          == [.cancel(.policy(token: token - 1)), .arm(.policy(token: token), after: .seconds(delay))])
      let restart = m.handle(.timerFired(.policy(token: token)))
      #expect(
        restart == [
          .arm(.policy(token: token + 1), after: .seconds(10)), .setVideoDirection(generation: 1, .recvonly),
          .createOffer(generation: 1, iceRestart: true),
        ])
      #expect(m.state == .reconnecting(attempt: attempt + 1))
    }
    #expect(
      m.handle(.connectionState(generation: 1, .failed))
        == [.cancel(.policy(token: 8)), .send(.hangup(.init(callId: "c"))), .finish])
    #expect(m.state == .ended(.iceFailed))
    #expect(m.handle(.server(candidate("late"))).isEmpty)  // ended: nothing more
  }

  // A restart offer goes out flagged as a restart once set; its answer is applied.
  @Test func aRestartOfferIsSentAsARestart() {
    var m = connectedCaller()
    _ = m.handle(.server(.iceRestartRequest(.init(callId: "c", from: bob))))
    #expect(
      m.handle(.offerCreated(generation: 1, SessionDescription(sdp: "offer-2")))
        == [.setLocal(generation: 1, SessionDescription(sdp: "offer-2"), .offer)])
    #expect(
      m.handle(.localDescriptionSet(generation: 1))
        == [.send(.offer(.init(callId: "c", sdp: "offer-2", iceRestart: true)))])
    #expect(m.handle(.server(candidate("b1"))).isEmpty)  // waits for the restart's answer
  }

  // A connection that cannot restart ICE is replaced; the old generation's events are ignored.
  @Test func aConnectionThatCannotRestartIsReplaced() {
    var m = connectedCaller(canRestartIce: false)
    #expect(
      m.handle(.connectionState(generation: 1, .failed))
        == [.arm(.policy(token: 1), after: .seconds(10)), .replaceConnection(generation: 2)])
    #expect(m.handle(.localCandidate(generation: 1, IceCandidate(candidate: "old"))).isEmpty)
    #expect(m.handle(.connectionState(generation: 1, .failed)).isEmpty)
    #expect(
      m.handle(.connectionMade(generation: 2, canRestartIce: false)).contains(
        .createOffer(generation: 2, iceRestart: false)))
    _ = m.handle(.offerCreated(generation: 2, SessionDescription(sdp: "fresh")))
    #expect(
      m.handle(.localDescriptionSet(generation: 2)) == [
        .send(.offer(.init(callId: "c", sdp: "fresh", iceRestart: true)))
      ])
  }

  // The answerer never restarts itself: it asks; the restart offer is answered.
  @Test func theAnswererAsksForARestartAndAnswersIt() {
    var m = callee()
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.remoteDescriptionSet(generation: 1))
    _ = m.handle(.accept)
    _ = m.handle(.answerCreated(generation: 1, answer))
    _ = m.handle(.localDescriptionSet(generation: 1))
    _ = m.handle(.connectionState(generation: 1, .connected))
    #expect(
      m.handle(.connectionState(generation: 1, .failed))
        == [.arm(.policy(token: 1), after: .seconds(10)), .send(.iceRestartRequest(.init(callId: "c")))])
    let restart = SessionDescription(sdp: "offer-alice-2")
    #expect(
      m.handle(.server(.offer(.init(callId: "c", from: alice, sdp: restart.sdp, iceRestart: true))))
        == [.setRemote(generation: 1, restart, .offer)])
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1))
        == [.setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1)])
    _ = m.handle(.answerCreated(generation: 1, SessionDescription(sdp: "answer-2")))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.answer(.init(callId: "c", sdp: "answer-2")))])
  }

  // Without trickle the description waits for gathering (or its timeout) and carries the candidates.
  @Test func withoutTrickleTheOfferCarriesTheGatheredCandidates() {
    var policy = CallEngine.Policy()
    policy.trickle = false
    var m = caller(policy)
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: 1, SessionDescription(sdp: "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n")))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.arm(.gathering(generation: 1), after: .seconds(5))])
    let host = IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 5000 typ host", sdpMLineIndex: 0)
    #expect(m.handle(.localCandidate(generation: 1, host)).isEmpty)
    let sent = m.handle(.timerFired(.gathering(generation: 1)))
    #expect(sent.first == .cancel(.gathering(generation: 1)))
    guard case .send(.invite(let invite))? = sent.last, let described = invite.offer else {
      Issue.record("no invite: \(sent)")
      return
    }
    #expect(described.sdp.contains("a=candidate:1 1 udp 1 10.0.0.1 5000 typ host"))
  }

  // Hanging up sends what the state calls for; failures end with the matching request.
  @Test func endingsSendWhatTheStateCallsFor() {
    var ringing = callee()
    _ = ringing.handle(.start)
    _ = ringing.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(ringing.handle(.hangup) == [.send(.decline(.init(callId: "c"))), .finish])
    var dialing = caller()
    _ = dialing.handle(.start)
    #expect(dialing.handle(.hangup) == [.send(.cancel(.init(callId: "c"))), .finish])
    var talking = connectedCaller()
    #expect(talking.handle(.hangup) == [.send(.hangup(.init(callId: "c"))), .finish])
    #expect(talking.handle(.hangup).isEmpty)
    var broken = caller()
    _ = broken.handle(.start)
    _ = broken.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(
      broken.handle(.localDescriptionFailed(generation: 1, "boom")) == [.send(.cancel(.init(callId: "c"))), .finish])
    #expect(broken.state == .ended(.error("offer: boom")))
    var glare = caller()
    _ = glare.handle(.start)
    #expect(glare.handle(.server(.callEnded(.init(callId: "c", reason: .glare, replacedBy: "a")))) == [.finish])
    #expect(glare.state.glareSurvivor == "a")
    var other = caller()
    #expect(other.handle(.server(.callEnded(.init(callId: "elsewhere", reason: .hangup)))).isEmpty)
  }

  // Mute and hold both silence the microphone; toggles reach the connection once it exists.
  @Test func muteHoldAndVideoFollowTheConnection() {
    var m = caller()
    #expect(m.handle(.setMuted(true)).isEmpty)
    _ = m.handle(.start)
    let made = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(made.first == .setAudio(generation: 1, false))
    #expect(made.contains(.setVideo(generation: 1, false)))  // an audio call: the camera stays closed
    #expect(m.handle(.setOnHold(true)) == [.setAudio(generation: 1, false)])
    #expect(m.handle(.setMuted(false)) == [.setAudio(generation: 1, false)])
    #expect(m.handle(.setOnHold(false)) == [.setAudio(generation: 1, true)])
    #expect(m.handle(.setVideoEnabled(false)).isEmpty)  // nothing sends video yet
    #expect(!m.isVideoEnabled)

    var video = caller(video: true)
    _ = video.handle(.start)
    #expect(video.handle(.connectionMade(generation: 1, canRestartIce: true)).last == .setVideo(generation: 1, true))
    #expect(video.handle(.setVideoEnabled(false)) == [.setVideo(generation: 1, false)])
  }

  // The camera mid-call: the track stops without renegotiation, and the peer is told.
  @Test func theCameraOffAndOnTellsThePeerOnceTheCallIsUp() {
    var m = connectedCaller(video: true)
    #expect(
      m.handle(.setVideoEnabled(false))
        == [.setVideo(generation: 1, false), .send(.mediaState(.init(callId: "c", camera: false)))])
    #expect(m.handle(.setVideoEnabled(false)).isEmpty)  // no change: nothing to tell
    #expect(
      m.handle(.setVideoEnabled(true))
        == [.setVideo(generation: 1, true), .send(.mediaState(.init(callId: "c", camera: true)))])
    #expect(m.handle(.server(.mediaState(.init(callId: "c", from: bob, camera: false)))) == [.remoteCamera(false)])
    // Another call's media-state is not ours.
    #expect(m.handle(.server(.mediaState(.init(callId: "other", from: bob, camera: true)))).isEmpty)
  }
}

/// A very fast Answer: the user answers before the callee's first connection exists (CallKit
/// answers while the engine still builds its peer connection). The accept is kept, and the
/// answer follows the connection.
@Suite struct CallEngineEarlyAcceptTests {
  @Test func anAcceptBeforeTheFirstConnectionExistsIsKept() {
    var m = callee()
    _ = m.handle(.start)
    #expect(m.handle(.accept).isEmpty)  // nothing to answer with yet...
    #expect(m.state == .connecting)  // ...but the call is answered
    let made = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(made.contains(.setRemote(generation: 1, SessionDescription(sdp: "offer-alice"), .offer)))
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1))
        == [.setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1)])
    _ = m.handle(.answerCreated(generation: 1, answer))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.accept(.init(callId: "c", answer: answer)))])
    #expect(m.handle(.connectionState(generation: 1, .connected)).isEmpty)
    #expect(m.state == .connected)
  }

  // An invite without an offer: the accept goes at once, and the caller's offer is answered.
  @Test func anEarlyAcceptWithoutAnOfferGoesAtOnce() {
    var m = callee(offer: nil)
    _ = m.handle(.start)
    #expect(m.handle(.accept) == [.send(.accept(.init(callId: "c", answer: nil)))])
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    let offer = SessionDescription(sdp: "offer-late")
    #expect(
      m.handle(.server(.offer(.init(callId: "c", from: alice, sdp: offer.sdp))))
        == [.setRemote(generation: 1, offer, .offer)])
    #expect(m.handle(.remoteDescriptionSet(generation: 1)).contains(.createAnswer(generation: 1)))
    _ = m.handle(.answerCreated(generation: 1, answer))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.answer(.init(callId: "c", sdp: answer.sdp)))])
  }

  // Answered even before `start`: the call starts, rings and accepts.
  @Test func anAcceptBeforeStartStartsTheCall() {
    var m = callee()
    #expect(m.handle(.accept) == [.send(.ringing(.init(callId: "c"))), .replaceConnection(generation: 1)])
    #expect(m.state == .connecting)
    #expect(m.handle(.start).isEmpty)
    #expect(
      m.handle(.connectionMade(generation: 1, canRestartIce: true)).contains(
        .setRemote(generation: 1, SessionDescription(sdp: "offer-alice"), .offer)))
    #expect(m.handle(.remoteDescriptionSet(generation: 1)).contains(.createAnswer(generation: 1)))
  }
}

/// Hold (protocol.md 7.17): the microphone goes off here and the other side is told, once the
/// call is up; the other side's hold is kept for the UI.
@Suite struct CallEngineHoldTests {
  @Test func holdingAConnectedCallTellsTheOtherSide() {
    var m = connectedCaller()
    #expect(
      m.handle(.setOnHold(true))
        == [.setAudio(generation: 1, false), .send(.hold(.init(callId: "c", onHold: true)))])
    #expect(m.handle(.setOnHold(true)) == [.setAudio(generation: 1, false)])  // no change: nothing to tell
    #expect(
      m.handle(.setOnHold(false))
        == [.setAudio(generation: 1, true), .send(.hold(.init(callId: "c", onHold: false)))])
  }

  @Test func theOtherSidesHoldIsKeptForTheUI() {
    var m = connectedCaller()
    #expect(!m.remoteIsOnHold)
    #expect(m.handle(.server(.hold(.init(callId: "c", from: bob, onHold: true)))) == [.remoteHold(true)])
    #expect(m.remoteIsOnHold)
    #expect(m.handle(.server(.hold(.init(callId: "c", from: bob, onHold: true)))).isEmpty)
    #expect(m.handle(.server(.hold(.init(callId: "other", from: bob, onHold: false)))).isEmpty)
    #expect(m.handle(.server(.hold(.init(callId: "c", from: bob, onHold: false)))) == [.remoteHold(false)])
    #expect(!m.remoteIsOnHold)
  }

  // Held before the call came up (CallKit holds a ringing call when another is answered): the
  // other side hears of it as it comes up, after the accept (the server relays a hold only
  // then).
  @Test func aHoldFromBeforeTheAcceptIsToldAsTheCallComesUp() {
    var caller = caller()
    _ = caller.handle(.start)
    _ = caller.handle(.connectionMade(generation: 1, canRestartIce: true))
    #expect(caller.handle(.setOnHold(true)) == [.setAudio(generation: 1, false)])
    #expect(
      caller.handle(.server(.accept(.init(callId: "c", from: bob, answer: answer)))) == [
        .send(.hold(.init(callId: "c", onHold: true))), .setRemote(generation: 1, answer, .answer),
      ])

    var callee = callee()
    _ = callee.handle(.start)
    _ = callee.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = callee.handle(.remoteDescriptionSet(generation: 1))
    #expect(callee.handle(.setOnHold(true)) == [.setAudio(generation: 1, false)])
    _ = callee.handle(.accept)
    _ = callee.handle(.answerCreated(generation: 1, answer))
    #expect(
      callee.handle(.localDescriptionSet(generation: 1)) == [
        .send(.accept(.init(callId: "c", answer: answer))), .send(.hold(.init(callId: "c", onHold: true))),
      ])
  }
}
