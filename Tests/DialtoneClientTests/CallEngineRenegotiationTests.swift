import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let alice = Peer(userId: "alice", deviceId: "a1")
private let bob = Peer(userId: "bob", deviceId: "b1")

/// A description whose video section says `direction`.
private func sdp(_ name: String, video direction: MediaDirection) -> SessionDescription {
  SessionDescription(
    sdp: "v=0\r\no=- \(name) 2 IN IP4 0.0.0.0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=sendrecv\r\n"
      + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=\(direction.rawValue)\r\n")
}

private func offer(_ d: SessionDescription, from: Peer, restart: Bool = false) -> CallEngineMachine.Event {
  .server(.offer(.init(callId: "c", from: from, sdp: d.sdp, iceRestart: restart)))
}

private func answer(_ d: SessionDescription, from: Peer) -> ServerMessage {
  .answer(.init(callId: "c", from: from, sdp: d.sdp))
}

/// An audio call, accepted and connected, on the callee's side.
private func connectedCallee(
  canRestartIce: Bool = true, offer: MediaDirection = .inactive
) -> CallEngineMachine {
  var m = CallEngineMachine(
    callId: "c", role: .callee, remoteUserId: "alice", remotePeer: alice,
    offer: sdp("o1", video: offer), video: false, policy: .init())
  _ = m.handle(.start)
  _ = m.handle(.connectionMade(generation: 1, canRestartIce: canRestartIce))
  _ = m.handle(.remoteDescriptionSet(generation: 1))
  _ = m.handle(.accept)
  _ = m.handle(.answerCreated(generation: 1, sdp("a1", video: .inactive)))
  _ = m.handle(.localDescriptionSet(generation: 1))
  _ = m.handle(.connectionState(generation: 1, .connected))
  return m
}

/// Upgrading a call to video and back (protocol.md 10), with the glare rule: the caller's
/// offer wins; the callee drops its own (never applied), answers, then offers again if needed.
@Suite struct CallEngineRenegotiationTests {
  @Test func theDirectionOfTheVideoSectionIsRead() {
    #expect(MediaDirection.video(in: sdp("x", video: .recvonly).sdp) == .recvonly)
    #expect(
      MediaDirection.video(in: "v=0\r\nm=audio 9 RTP/AVP 0\r\na=sendonly\r\nm=video 9 RTP/AVP 96\r\n") == .sendrecv)
    #expect(MediaDirection.video(in: "v=0\r\nm=video 0 RTP/AVP 96\r\na=sendrecv\r\n") == .inactive)
    #expect(MediaDirection.video(in: "v=0\r\nm=video 0 RTP/AVP 96\r\na=bundle-only\r\na=recvonly\r\n") == .recvonly)
    #expect(MediaDirection.video(in: "v=0\r\nm=audio 9 RTP/AVP 0\r\n") == nil)
    #expect(MediaDirection(sends: true, receives: false) == .sendonly && MediaDirection.sendonly.sends)
  }

  // The caller upgrades: its offer leaves before it is applied; the camera opens with the answer.
  @Test func theCallerUpgradesAnAudioCallAndGoesBack() {
    var m = connectedCaller(answer: sdp("a1", video: .inactive))
    #expect(!m.hasVideo)
    #expect(
      m.handle(.setSendsVideo(true))
        == [.setVideoDirection(generation: 1, .sendrecv), .createOffer(generation: 1, iceRestart: false)])
    let upgrade = sdp("o2", video: .sendrecv)
    #expect(
      m.handle(.offerCreated(generation: 1, upgrade))
        == [.send(.offer(.init(callId: "c", sdp: upgrade.sdp, iceRestart: false)))])
    let reply = sdp("a2", video: .recvonly)
    #expect(m.handle(.server(answer(reply, from: bob))) == [.setLocal(generation: 1, upgrade, .offer)])
    #expect(
      m.handle(.localDescriptionSet(generation: 1))
        == [.setRemote(generation: 1, reply, .answer), .setVideo(generation: 1, true)])
    #expect(m.handle(.remoteDescriptionSet(generation: 1)).isEmpty)
    #expect(m.sendsVideo && !m.remoteSendsVideo && m.hasVideo)

    // Back to audio: the camera closes at once, then the offer.
    #expect(
      m.handle(.setSendsVideo(false)) == [
        .setVideo(generation: 1, false), .setVideoDirection(generation: 1, .recvonly),
        .createOffer(generation: 1, iceRestart: false),
      ])
    #expect(!m.hasVideo)
  }

  // The callee answers the caller's upgrade, receiving video; it sends only when it wants to.
  @Test func theCalleeAnswersAnUpgradeAndCanUpgradeItself() {
    var m = connectedCallee()
    let upgrade = sdp("o2", video: .sendrecv)
    #expect(m.handle(offer(upgrade, from: alice)) == [.setRemote(generation: 1, upgrade, .offer)])
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1)) == [
        .remoteVideo(true), .setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1),
      ])
    #expect(m.remoteSendsVideo && m.hasVideo && !m.sendsVideo)
    let reply = sdp("a2", video: .recvonly)
    _ = m.handle(.answerCreated(generation: 1, reply))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.answer(.init(callId: "c", sdp: reply.sdp)))])

    // Now the callee turns its camera on too: its own offer, answered by the caller.
    #expect(
      m.handle(.setSendsVideo(true))
        == [.setVideoDirection(generation: 1, .sendrecv), .createOffer(generation: 1, iceRestart: false)])
    let own = sdp("o3", video: .sendrecv)
    #expect(
      m.handle(.offerCreated(generation: 1, own)) == [
        .send(.offer(.init(callId: "c", sdp: own.sdp, iceRestart: false)))
      ])
    #expect(
      m.handle(.server(answer(sdp("a3", video: .sendrecv), from: alice))) == [.setLocal(generation: 1, own, .offer)])
  }

  // The caller answers the callee's offer (either side may renegotiate once connected).
  @Test func theCallerAnswersTheCalleesUpgrade() {
    var m = connectedCaller(answer: sdp("a1", video: .inactive))
    let upgrade = sdp("b2", video: .sendrecv)
    #expect(m.handle(offer(upgrade, from: bob)) == [.setRemote(generation: 1, upgrade, .offer)])
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1)) == [
        .remoteVideo(true), .setVideoDirection(generation: 1, .recvonly), .createAnswer(generation: 1),
      ])
    let reply = sdp("a2", video: .recvonly)
    _ = m.handle(.answerCreated(generation: 1, reply))
    #expect(m.handle(.localDescriptionSet(generation: 1)) == [.send(.answer(.init(callId: "c", sdp: reply.sdp)))])
  }

  // Glare: both upgrade at once. The caller ignores the callee's offer; the callee drops its
  // own, answers the caller's with its camera on, and needs no offer of its own after that.
  @Test func bothSidesUpgradingAtOnceEndWithBothSending() {
    var caller = connectedCaller(answer: sdp("a1", video: .inactive))
    var callee = connectedCallee()
    _ = caller.handle(.setSendsVideo(true))
    _ = callee.handle(.setSendsVideo(true))
    let callerOffer = sdp("o2", video: .sendrecv)
    let calleeOffer = sdp("b2", video: .sendrecv)
    _ = caller.handle(.offerCreated(generation: 1, callerOffer))
    _ = callee.handle(.offerCreated(generation: 1, calleeOffer))

    #expect(caller.handle(offer(calleeOffer, from: bob)).isEmpty)
    #expect(callee.handle(offer(callerOffer, from: alice)) == [.setRemote(generation: 1, callerOffer, .offer)])
    #expect(
      callee.handle(.remoteDescriptionSet(generation: 1)) == [
        .remoteVideo(true), .setVideoDirection(generation: 1, .sendrecv), .createAnswer(generation: 1),
      ])
    let calleeAnswer = sdp("b3", video: .sendrecv)
    _ = callee.handle(.answerCreated(generation: 1, calleeAnswer))
    #expect(
      callee.handle(.localDescriptionSet(generation: 1))
        == [.send(.answer(.init(callId: "c", sdp: calleeAnswer.sdp))), .setVideo(generation: 1, true)])

    #expect(caller.handle(.server(answer(calleeAnswer, from: bob))) == [.setLocal(generation: 1, callerOffer, .offer)])
    _ = caller.handle(.localDescriptionSet(generation: 1))
    #expect(caller.handle(.remoteDescriptionSet(generation: 1)) == [.remoteVideo(true)])
    #expect(caller.sendsVideo && caller.remoteSendsVideo && callee.sendsVideo && callee.remoteSendsVideo)
  }

  // Glare where the caller's offer does not take video: the callee answers it, then offers again.
  @Test func theCalleeOffersAgainWhenTheWinningOfferDidNotCoverItsChange() {
    var callee = connectedCallee()
    _ = callee.handle(.setSendsVideo(true))
    _ = callee.handle(.offerCreated(generation: 1, sdp("b2", video: .sendrecv)))
    let restart = sdp("o2", video: .inactive)
    #expect(callee.handle(offer(restart, from: alice, restart: true)) == [.setRemote(generation: 1, restart, .offer)])
    _ = callee.handle(.remoteDescriptionSet(generation: 1))
    _ = callee.handle(.answerCreated(generation: 1, sdp("b3", video: .inactive)))
    #expect(
      callee.handle(.localDescriptionSet(generation: 1)) == [
        .send(.answer(.init(callId: "c", sdp: sdp("b3", video: .inactive).sdp))),
        .setVideoDirection(generation: 1, .sendrecv), .createOffer(generation: 1, iceRestart: false),
      ])
  }

  // An offer arriving while our renegotiation's answer is applied waits for it, then is answered.
  @Test func anOfferDuringOurAnswerWaitsForIt() {
    var m = connectedCaller(answer: sdp("a1", video: .inactive))
    _ = m.handle(.setSendsVideo(true))
    let own = sdp("o2", video: .sendrecv)
    _ = m.handle(.offerCreated(generation: 1, own))
    _ = m.handle(.server(answer(sdp("b2", video: .recvonly), from: bob)))
    let next = sdp("b3", video: .sendrecv)
    #expect(m.handle(offer(next, from: bob)).isEmpty)
    _ = m.handle(.localDescriptionSet(generation: 1))
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1)) == [.setRemote(generation: 1, next, .offer)])
    #expect(m.handle(.remoteDescriptionSet(generation: 1)).contains(.createAnswer(generation: 1)))
  }

  // webrtcbin cannot change a negotiated direction: the caller upgrades by an ICE restart on a
  // fresh connection, whose first offer carries the new direction.
  @Test func aCallerThatCannotRenegotiateInPlaceRestartsOnAFreshConnection() {
    var m = connectedCaller(canRestartIce: false, answer: sdp("a1", video: .inactive))
    let effects = m.handle(.setSendsVideo(true))
    #expect(effects.contains(.replaceConnection(generation: 2)))
    #expect(m.state == .reconnecting(attempt: 1))
    let made = m.handle(.connectionMade(generation: 2, canRestartIce: false))
    #expect(made.contains(.setVideoDirection(generation: 2, .sendrecv)))
    #expect(made.contains(.createOffer(generation: 2, iceRestart: false)))
    _ = m.handle(.offerCreated(generation: 2, sdp("o2", video: .sendrecv)))
    #expect(
      m.handle(.localDescriptionSet(generation: 2))
        == [.send(.offer(.init(callId: "c", sdp: sdp("o2", video: .sendrecv).sdp, iceRestart: true)))])
    _ = m.handle(.server(answer(sdp("b2", video: .recvonly), from: bob)))
    #expect(m.handle(.remoteDescriptionSet(generation: 2)).isEmpty)
    #expect(m.handle(.connectionState(generation: 2, .connected)).contains(.setVideo(generation: 2, true)) == false)
    #expect(m.state == .connected && m.sendsVideo)
    // A peer's in-place offer cannot be applied either: the caller restarts instead.
    #expect(m.handle(offer(sdp("b3", video: .sendrecv), from: bob)).contains(.replaceConnection(generation: 3)))
  }

  // The callee of such a connection asks the caller for the restart, once, and its answer from
  // the fresh connection sends video.
  @Test func aCalleeThatCannotRenegotiateInPlaceAsksForARestart() {
    var m = connectedCallee(canRestartIce: false, offer: .recvonly)
    #expect(m.handle(.setSendsVideo(true)) == [.send(.iceRestartRequest(.init(callId: "c")))])
    #expect(m.handle(.setVideoEnabled(true)).isEmpty)  // asked once; the camera waits
    let restart = sdp("o2", video: .recvonly)
    #expect(m.handle(offer(restart, from: alice, restart: true)) == [.replaceConnection(generation: 2)])
    let made = m.handle(.connectionMade(generation: 2, canRestartIce: false))
    #expect(made.contains(.setRemote(generation: 2, restart, .offer)))
    #expect(
      m.handle(.remoteDescriptionSet(generation: 2))
        == [.setVideoDirection(generation: 2, .sendrecv), .createAnswer(generation: 2)])
    _ = m.handle(.answerCreated(generation: 2, sdp("a2", video: .sendonly)))
    #expect(m.handle(.localDescriptionSet(generation: 2)).contains(.setVideo(generation: 2, true)))
  }

  // Before the call is up an upgrade waits: the offer follows the answer.
  @Test func anUpgradeBeforeTheAnswerWaitsForIt() {
    var m = CallEngineMachine(
      callId: "c", role: .caller, remoteUserId: "bob", remotePeer: nil, offer: nil, video: false, policy: .init())
    _ = m.handle(.start)
    _ = m.handle(.connectionMade(generation: 1, canRestartIce: true))
    _ = m.handle(.offerCreated(generation: 1, sdp("o1", video: .inactive)))
    _ = m.handle(.localDescriptionSet(generation: 1))
    #expect(m.handle(.setSendsVideo(true)).isEmpty)
    _ = m.handle(.server(.accept(.init(callId: "c", from: bob, answer: sdp("a1", video: .inactive)))))
    #expect(
      m.handle(.remoteDescriptionSet(generation: 1))
        == [.setVideoDirection(generation: 1, .sendrecv), .createOffer(generation: 1, iceRestart: false)])
  }
}
