import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneClient

/// Rule 3 for each connection of a group call (protocol.md 20.10), with virtual time: the
/// machine arms and cancels the timers, the test fires them. The rules are `IceRecovery`'s, the
/// same as a 1:1 call's; what a restart is differs per stream.
@Suite struct GroupCallRecoveryTests {
  typealias Ref = GroupCallMachine.StreamRef
  static let callId = GroupCallMachineTests.callId
  static let bob = GroupCallMachineTests.bob

  /// A joined call whose publisher is connected.
  static func publishing(canRestartIce: Bool) -> (GroupCallMachine, Ref) {
    var m = GroupCallMachineTests.joined()
    guard case .makeConnection(let ref, _)? = m.handle(.server(.groupMedia(.init(callId: callId, sfu: .janus)))).first
    else { fatalError("no publisher") }
    _ = m.handle(.connectionMade(ref, canRestartIce: canRestartIce))
    _ = m.handle(.descriptionCreated(ref, SessionDescription(sdp: "offer-1")))
    _ = m.handle(.localDescriptionSet(ref))
    _ = m.handle(.server(.groupAnswer(.init(callId: callId, stream: "publisher", sdp: "answer-1"))))
    _ = m.handle(.remoteDescriptionSet(ref))
    _ = m.handle(.connectionState(ref, .connected))
    return (m, ref)
  }

  /// Bob's feed on a connection of its own, connected.
  static func receiving(_ m: inout GroupCallMachine, canRestartIce: Bool) -> Ref {
    guard case .makeConnection(let ref, _)? = m.handle(GroupCallMachineTests.offer("feed-9")).first else {
      fatalError("no feed connection")
    }
    _ = m.handle(.connectionMade(ref, canRestartIce: canRestartIce))
    _ = m.handle(.remoteDescriptionSet(ref))
    _ = m.handle(.descriptionCreated(ref, SessionDescription(sdp: "answer-feed")))
    _ = m.handle(.localDescriptionSet(ref))
    _ = m.handle(.connectionState(ref, .connected))
    return ref
  }

  /// webrtcbin cannot restart ICE: after the disconnected grace the publisher is replaced by a
  /// fresh connection, whose offer says so; its connecting ends the recovery.
  @Test func aPublisherThatCannotRestartIceIsReplacedAfterTheGrace() {
    var (m, ref) = Self.publishing(canRestartIce: false)
    #expect(
      m.handle(.connectionState(ref, .disconnected)) == [
        .notify(.publisherState(.disconnected)), .arm(1, after: .seconds(4)),
      ])
    let fresh = Ref(id: "publisher", generation: ref.generation + 1)
    #expect(
      m.handle(.timerFired(1)) == [
        .arm(2, after: .seconds(10)), .close(ref),
        .makeConnection(fresh, PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)),
      ])
    // The old connection says nothing any more.
    #expect(m.handle(.connectionState(ref, .failed)).isEmpty)
    #expect(m.handle(.connectionMade(fresh, canRestartIce: false)) == [.createOffer(fresh)])
    let offer = SessionDescription(sdp: "offer-2")
    #expect(m.handle(.descriptionCreated(fresh, offer)) == [.setLocal(fresh, offer, .offer)])
    #expect(
      m.handle(.localDescriptionSet(fresh)) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-2", restart: .connection)))
      ])
    _ = m.handle(.server(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: "answer-2"))))
    _ = m.handle(.remoteDescriptionSet(fresh))
    #expect(m.handle(.connectionState(fresh, .connected)) == [.notify(.publisherState(.connected)), .cancel(2)])
    // A stale timer does nothing.
    #expect(m.handle(.timerFired(2)).isEmpty)
  }

  /// An engine that restarts ICE in place: `failed` restarts at once on the same connection,
  /// and the candidates of the new generation follow the restart offer.
  @Test func aPublisherThatCanRestartIceOffersNewCredentialsAtOnceOnFailure() {
    var (m, ref) = Self.publishing(canRestartIce: true)
    #expect(
      m.handle(.connectionState(ref, .failed)) == [
        .notify(.publisherState(.failed)), .arm(1, after: .seconds(10)), .createRestartOffer(ref),
      ])
    let candidate = IceCandidate(candidate: "c-new")
    #expect(m.handle(.localCandidate(ref, candidate)).isEmpty)
    let offer = SessionDescription(sdp: "offer-restart")
    #expect(m.handle(.descriptionCreated(ref, offer)) == [.setLocal(ref, offer, .offer)])
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-restart", restart: .ice))),
        .send(.groupCandidate(.init(callId: Self.callId, stream: "publisher", candidate: candidate))),
      ])
    // The restart's timeout runs out: the next one waits for the first backoff, and offers
    // again although the SFU never answered the last offer.
    #expect(m.handle(.timerFired(1)) == [.arm(2, after: .seconds(1))])
    #expect(m.handle(.timerFired(2)) == [.arm(3, after: .seconds(10)), .createRestartOffer(ref)])
  }

  /// A stream the SFU offered asks the server for a new offer; one for a fresh connection
  /// replaces the stream's connection, and the app is told the participant's media moved.
  @Test func aFeedAsksForAFreshOfferAndMovesToItsNewConnection() {
    var m = GroupCallMachineTests.joined()
    let ref = Self.receiving(&m, canRestartIce: false)
    #expect(
      m.handle(.connectionState(ref, .disconnected)) == [
        .notify(.remoteStreamState(stream: "feed-9", from: Self.bob, .disconnected)), .arm(1, after: .seconds(4)),
      ])
    #expect(
      m.handle(.timerFired(1)) == [
        .arm(2, after: .seconds(10)),
        .send(.groupRestart(.init(callId: Self.callId, stream: "feed-9", restart: .connection))),
      ])
    let fresh = Ref(id: "feed-9", generation: ref.generation + 1)
    let offer = ServerMessage.groupOffer(
      .init(callId: Self.callId, stream: "feed-9", sdp: "offer-2", from: Self.bob, restart: .connection))
    #expect(
      m.handle(.server(offer)) == [
        .close(ref), .notify(.remoteStreamRemoved(stream: "feed-9", from: Self.bob)),
        .makeConnection(fresh, PeerConnectionConfiguration(iceServers: [], video: false, remoteParticipant: Self.bob)),
      ])
    #expect(
      m.handle(.connectionMade(fresh, canRestartIce: false)) == [
        .notify(.remoteStreamAdded(fresh, from: Self.bob)),
        .setRemote(fresh, SessionDescription(sdp: "offer-2"), .offer),
      ])
    #expect(
      m.handle(.connectionState(fresh, .connected)) == [
        .notify(.remoteStreamState(stream: "feed-9", from: Self.bob, .connected)), .cancel(2),
      ])
  }

  /// With ICE restarts in place, the server's offer renegotiates the same connection.
  @Test func aFeedThatCanRestartIceAnswersTheNewOfferOnItsConnection() {
    var m = GroupCallMachineTests.joined()
    let ref = Self.receiving(&m, canRestartIce: true)
    #expect(
      m.handle(.connectionState(ref, .failed)) == [
        .notify(.remoteStreamState(stream: "feed-9", from: Self.bob, .failed)), .arm(1, after: .seconds(10)),
        .send(.groupRestart(.init(callId: Self.callId, stream: "feed-9", restart: .ice))),
      ])
    let offer = ServerMessage.groupOffer(
      .init(callId: Self.callId, stream: "feed-9", sdp: "offer-ice", from: Self.bob, restart: .ice))
    #expect(m.handle(.server(offer)) == [.setRemote(ref, SessionDescription(sdp: "offer-ice"), .offer)])
    #expect(m.handle(.remoteDescriptionSet(ref)) == [.createAnswer(ref)])
    let answer = SessionDescription(sdp: "answer-ice")
    _ = m.handle(.descriptionCreated(ref, answer))
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupAnswer(.init(callId: Self.callId, stream: "feed-9", sdp: "answer-ice")))
      ])
    // Without `restart`, an offer of a stream the device has is still ignored.
    #expect(m.handle(GroupCallMachineTests.offer("feed-9", "again")).isEmpty)
  }

  /// A restart's offer that comes while the feed's first answer is being made waits for it.
  @Test func aRestartOfferWaitsForTheAnswerUnderWay() {
    var m = GroupCallMachineTests.joined()
    guard case .makeConnection(let ref, _)? = m.handle(GroupCallMachineTests.offer("feed-9")).first else {
      Issue.record("no feed connection")
      return
    }
    _ = m.handle(.connectionMade(ref, canRestartIce: true))
    #expect(m.handle(.remoteDescriptionSet(ref)) == [.createAnswer(ref)])
    let offer = ServerMessage.groupOffer(
      .init(callId: Self.callId, stream: "feed-9", sdp: "offer-ice", from: Self.bob, restart: .ice))
    #expect(m.handle(.server(offer)).isEmpty)
    _ = m.handle(.descriptionCreated(ref, SessionDescription(sdp: "answer-1")))
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupAnswer(.init(callId: Self.callId, stream: "feed-9", sdp: "answer-1"))),
        .setRemote(ref, SessionDescription(sdp: "offer-ice"), .offer),
      ])
  }

  /// A changed network path restarts every connection at once, without waiting for a state.
  @Test func aNetworkChangeRestartsEveryConnectionAtOnce() {
    var (m, publisher) = Self.publishing(canRestartIce: false)
    let feed = Self.receiving(&m, canRestartIce: false)
    let effects = m.handle(.networkChanged)
    #expect(effects.contains(.send(.groupRestart(.init(callId: Self.callId, stream: "feed-9", restart: .connection)))))
    #expect(effects.contains(.close(publisher)))
    #expect(effects.filter { if case .arm = $0 { true } else { false } }.count == 2)
    #expect(!effects.contains(.close(feed)))  // it waits for the server's new offer
    // Those restarting already are left to it.
    #expect(m.handle(.networkChanged).isEmpty)
  }

  /// The rules' end: after the last retry fails the device leaves, rather than stay in silence.
  @Test func afterTheLastFailedRestartTheDeviceLeaves() {
    var m = GroupCallMachineTests.joined()
    let ref = Self.receiving(&m, canRestartIce: false)
    _ = m.handle(.connectionState(ref, .failed))  // restart 1, timeout 1
    #expect(m.handle(.timerFired(1)) == [.arm(2, after: .seconds(1))])
    #expect(
      m.handle(.timerFired(2)) == [
        .arm(3, after: .seconds(10)),
        .send(.groupRestart(.init(callId: Self.callId, stream: "feed-9", restart: .connection))),
      ])
    #expect(m.handle(.timerFired(3)) == [.arm(4, after: .seconds(2))])
    _ = m.handle(.timerFired(4))  // restart 3
    #expect(m.handle(.timerFired(5)) == [.arm(6, after: .seconds(3))])
    _ = m.handle(.timerFired(6))  // restart 4, the last
    #expect(
      m.handle(.timerFired(7)) == [
        .notify(.error("could not receive bob: its connection could not be restored")),
        .settle(.groupLeave(.init(callId: Self.callId))),
      ])
  }

  /// The single subscriber connection (20.9): a fresh connection takes the new offer's sections.
  @Test func theSubscriberConnectionMovesToAFreshOneWithItsParticipants() {
    var m = GroupCallMachineTests.joined()
    let sections = [GroupStreamSection(mid: "0", kind: .audio, from: Self.bob)]
    let first = ServerMessage.groupOffer(
      .init(callId: Self.callId, stream: "subscriber", sdp: "offer-1", streams: sections))
    guard case .makeConnection(let ref, _)? = m.handle(.server(first)).first else {
      Issue.record("no subscriber connection")
      return
    }
    _ = m.handle(.connectionMade(ref, canRestartIce: false))
    _ = m.handle(.remoteDescriptionSet(ref))
    _ = m.handle(.descriptionCreated(ref, SessionDescription(sdp: "answer-1")))
    _ = m.handle(.localDescriptionSet(ref))
    _ = m.handle(.connectionState(ref, .connected))
    #expect(
      m.handle(.networkChanged) == [
        .arm(1, after: .seconds(10)),
        .send(.groupRestart(.init(callId: Self.callId, stream: "subscriber", restart: .connection))),
      ])
    let fresh = Ref(id: "subscriber", generation: ref.generation + 1)
    let replaced = ServerMessage.groupOffer(
      .init(callId: Self.callId, stream: "subscriber", sdp: "offer-2", streams: sections, restart: .connection))
    #expect(
      m.handle(.server(replaced)) == [
        .close(ref), .notify(.remoteStreamRemoved(stream: "subscriber", from: Self.bob)),
        .makeConnection(fresh, PeerConnectionConfiguration(iceServers: [], video: false, multistream: true)),
      ])
    #expect(
      m.handle(.connectionMade(fresh, canRestartIce: false)) == [
        .setRemoteSections(fresh, sections), .notify(.remoteStreamAdded(fresh, from: Self.bob)),
        .setRemote(fresh, SessionDescription(sdp: "offer-2"), .offer),
      ])
  }
}
