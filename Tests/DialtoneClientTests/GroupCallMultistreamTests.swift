import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

/// `GroupCallMachine` with one subscriber connection (protocol.md 20.9): asked for when joining,
/// made by the SFU's first offer, renegotiated by each later one (one at a time), and the
/// participants its sections carry told to the engine and the app as they come and go.
@Suite struct GroupCallMultistreamTests {
  static let callId = "g-1"
  static let bob = Peer(userId: "bob", deviceId: "laptop")
  static let carol = Peer(userId: "carol", deviceId: "phone")
  static let dave = Peer(userId: "dave", deviceId: "tablet")
  static let state = GroupCallState(
    callId: callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
    members: [GroupMember(userId: "alice", state: .joined), GroupMember(userId: "bob", state: .joined)])
  typealias Ref = GroupCallMachine.StreamRef

  static func joined() -> GroupCallMachine {
    var m = GroupCallMachine(
      callId: callId, entry: .create(members: ["bob"], title: nil), video: false, iceServers: [], multistream: true)
    _ = m.handle(.start)
    _ = m.handle(.replied(.ack(.init(replyTo: "r", callId: callId, group: state))))
    return m
  }

  static func offer(_ sdp: String, _ sections: [GroupStreamSection]) -> GroupCallMachine.Event {
    .server(.groupOffer(.init(callId: callId, stream: "subscriber", sdp: sdp, streams: sections)))
  }

  static func audio(_ mid: String, _ from: Peer) -> GroupStreamSection {
    GroupStreamSection(mid: mid, kind: .audio, from: from)
  }

  /// Runs one offer's answer through the machine once it is applied: the answer goes out.
  static func answer(_ m: inout GroupCallMachine, _ ref: Ref, _ sdp: String) -> [GroupCallMachine.Effect] {
    #expect(m.handle(.remoteDescriptionSet(ref)) == [.createAnswer(ref)])
    let answer = SessionDescription(sdp: sdp)
    #expect(m.handle(.descriptionCreated(ref, answer)) == [.setLocal(ref, answer, .answer)])
    return m.handle(.localDescriptionSet(ref))
  }

  @Test func joiningAndCreatingAskForOneSubscriberConnection() {
    var creating = GroupCallMachine(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), video: false, iceServers: [],
      multistream: true)
    // Its publisher and subscriber connection are prepared while the request is on its way.
    let prepared = GroupCallMachine.Effect.prepareConnections([
      PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true),
      PeerConnectionConfiguration(iceServers: [], video: false, multistream: true),
    ])
    #expect(
      creating.handle(.start) == [
        prepared, .request(.groupCreate(.init(callId: Self.callId, members: ["bob"], multistream: true))),
      ])
    var joining = GroupCallMachine(callId: Self.callId, entry: .join, video: false, iceServers: [], multistream: true)
    #expect(joining.handle(.start) == [prepared, .request(.groupJoin(.init(callId: Self.callId, multistream: true)))])
    // Without it, nothing is asked (the server offers a connection per participant), and only
    // the publisher is prepared.
    var plain = GroupCallMachine(callId: Self.callId, entry: .join, video: false, iceServers: [])
    #expect(
      plain.handle(.start) == [
        .prepareConnections([PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)]),
        .request(.groupJoin(.init(callId: Self.callId))),
      ])
  }

  @Test func aRingPreparesTheConnectionsTheJoinWillMake() {
    let invite = ServerMessage.GroupInvite(
      callId: Self.callId, from: Self.bob, video: true, memberCount: 2, createdAt: 1, group: Self.state)
    var m = GroupCallMachine(
      callId: Self.callId, entry: .invited(invite), video: true, iceServers: [], multistream: true)
    #expect(
      m.handle(.start) == [
        .prepareConnections([
          PeerConnectionConfiguration(iceServers: [], video: true, sendOnly: true),
          PeerConnectionConfiguration(iceServers: [], video: true, multistream: true),
        ]),
        .send(.groupRinging(.init(callId: Self.callId))),
      ])
    // Answering asks to join; nothing is prepared twice.
    #expect(
      m.handle(.join) == [
        .notify(.state(.joining)), .request(.groupJoin(.init(callId: Self.callId, multistream: true))),
      ])
  }

  @Test func theFirstOfferMakesTheConnectionAndEachLaterOneRenegotiatesIt() {
    var m = Self.joined()
    let made = m.handle(Self.offer("offer-1", [Self.audio("0", Self.bob)]))
    guard case .makeConnection(let ref, let configuration)? = made.first, made.count == 1 else {
      Issue.record("no connection: \(made)")
      return
    }
    #expect(ref.id == "subscriber" && configuration.multistream && !configuration.sendOnly)
    #expect(configuration.remoteParticipant == nil)
    // A candidate of the SFU's waits for the offer to be applied.
    let early = IceCandidate(candidate: "c-sfu")
    #expect(
      m.handle(.server(.groupCandidate(.init(callId: Self.callId, stream: "subscriber", candidate: early))))
        .isEmpty)
    #expect(
      m.handle(.connectionMade(ref)) == [
        .setRemoteSections(ref, [Self.audio("0", Self.bob)]),
        .notify(.remoteStreamAdded(ref, from: Self.bob)),
        .setRemote(ref, SessionDescription(sdp: "offer-1"), .offer),
      ])
    #expect(m.handle(.remoteDescriptionSet(ref)) == [.addCandidate(ref, early), .createAnswer(ref)])
    let answer = SessionDescription(sdp: "answer-1")
    #expect(m.handle(.descriptionCreated(ref, answer)) == [.setLocal(ref, answer, .answer)])
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupAnswer(.init(callId: Self.callId, stream: "subscriber", sdp: "answer-1")))
      ])

    // Carol starts publishing: the same connection, a new section.
    #expect(
      m.handle(Self.offer("offer-2", [Self.audio("0", Self.bob), Self.audio("1", Self.carol)])) == [
        .setRemoteSections(ref, [Self.audio("0", Self.bob), Self.audio("1", Self.carol)]),
        .notify(.remoteStreamAdded(ref, from: Self.carol)),
        .setRemote(ref, SessionDescription(sdp: "offer-2"), .offer),
      ])
    #expect(
      Self.answer(&m, ref, "answer-2") == [
        .send(.groupAnswer(.init(callId: Self.callId, stream: "subscriber", sdp: "answer-2")))
      ])
    // Candidates now go straight to the connection, both ways.
    #expect(
      m.handle(.server(.groupCandidate(.init(callId: Self.callId, stream: "subscriber", candidate: early))))
        == [.addCandidate(ref, early)])
    let local = IceCandidate(candidate: "c-local")
    #expect(
      m.handle(.localCandidate(ref, local)) == [
        .send(.groupCandidate(.init(callId: Self.callId, stream: "subscriber", candidate: local)))
      ])
  }

  /// The server sends the next offer only after the answer; should one come earlier anyway, it
  /// waits, and only the latest counts. Bob's section going inactive and Janus reusing its mid
  /// for Dave tell the app Bob's stream ended and Dave's arrived.
  @Test func anOfferThatComesMidNegotiationWaitsAndAReusedMidChangesHands() {
    var m = Self.joined()
    guard case .makeConnection(let ref, _)? = m.handle(Self.offer("offer-1", [Self.audio("0", Self.bob)])).first
    else {
      Issue.record("no connection")
      return
    }
    _ = m.handle(.connectionMade(ref))
    #expect(m.handle(Self.offer("offer-2", [Self.audio("0", Self.bob), Self.audio("1", Self.carol)])).isEmpty)
    #expect(m.handle(Self.offer("offer-3", [Self.audio("0", Self.dave), Self.audio("1", Self.carol)])).isEmpty)
    #expect(
      Self.answer(&m, ref, "answer-1") == [
        .send(.groupAnswer(.init(callId: Self.callId, stream: "subscriber", sdp: "answer-1"))),
        .setRemoteSections(ref, [Self.audio("0", Self.dave), Self.audio("1", Self.carol)]),
        .notify(.remoteStreamRemoved(stream: "subscriber", from: Self.bob)),
        .notify(.remoteStreamAdded(ref, from: Self.dave)),
        .notify(.remoteStreamAdded(ref, from: Self.carol)),
        .setRemote(ref, SessionDescription(sdp: "offer-3"), .offer),
      ])
    _ = Self.answer(&m, ref, "answer-3")
    // Everyone leaves: every section inactive, the connection stays for whoever comes next.
    #expect(
      m.handle(Self.offer("offer-4", [])) == [
        .setRemoteSections(ref, []),
        .notify(.remoteStreamRemoved(stream: "subscriber", from: Self.dave)),
        .notify(.remoteStreamRemoved(stream: "subscriber", from: Self.carol)),
        .setRemote(ref, SessionDescription(sdp: "offer-4"), .offer),
      ])
    #expect(m.has(ref))
  }

  @Test func theConnectionsStateIsEachParticipantsItCarries() {
    var m = Self.joined()
    guard
      case .makeConnection(let ref, _)? = m.handle(
        Self.offer("offer-1", [Self.audio("0", Self.bob), Self.audio("1", Self.carol)])
      ).first
    else {
      Issue.record("no connection")
      return
    }
    _ = m.handle(.connectionMade(ref))
    #expect(
      m.handle(.connectionState(ref, .connected)) == [
        .notify(.remoteStreamState(stream: "subscriber", from: Self.bob, .connected)),
        .notify(.remoteStreamState(stream: "subscriber", from: Self.carol, .connected)),
      ])
    // Leaving closes it with everything else.
    _ = m.handle(.leave)
    #expect(m.handle(.settled) == [.finish(.ended(nil))])
  }

  /// A server that did not grant it (an older one) offers a connection per participant as
  /// before: the machine takes those too.
  @Test func perParticipantOffersStillWorkWhenAskedButNotGranted() {
    var m = Self.joined()
    _ = m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus))))
    let made = m.handle(.server(.groupOffer(.init(callId: Self.callId, stream: "feed-1", sdp: "o", from: Self.bob))))
    guard case .makeConnection(let ref, let configuration)? = made.first else {
      Issue.record("no connection: \(made)")
      return
    }
    #expect(ref.id == "feed-1" && configuration.remoteParticipant == Self.bob && !configuration.multistream)
  }
}
