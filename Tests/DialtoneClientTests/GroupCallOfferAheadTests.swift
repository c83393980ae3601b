import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

/// `GroupCallMachine` with `offersAhead` (what `GroupCall` runs): the publisher's connection
/// and offer are made while the create or join request is on its way, and the offer goes out
/// when `group-media` comes, never before.
@Suite struct GroupCallOfferAheadTests {
  static let callId = "g-1"
  static let bob = Peer(userId: "bob", deviceId: "laptop")
  static let state = GroupCallState(
    callId: callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
    members: [GroupMember(userId: "alice", state: .joined), GroupMember(userId: "bob", state: .joined)])
  static let publisher = PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)
  static let media = GroupCallMachine.Event.server(.groupMedia(.init(callId: callId, sfu: .janus)))
  static let joined = GroupCallMachine.Event.replied(.ack(.init(replyTo: "r", callId: callId, group: state)))
  typealias Ref = GroupCallMachine.StreamRef

  /// Starts a created call; returns the publisher's connection, made with the request.
  static func creating(_ m: inout GroupCallMachine) -> Ref? {
    let started = m.handle(.start)
    #expect(started.count == 3)
    #expect(started.first == .prepareConnections([publisher]))
    #expect(started.dropFirst().first == .request(.groupCreate(.init(callId: callId, members: ["bob"], video: false))))
    guard case .makeConnection(let ref, let configuration)? = started.last else { return nil }
    #expect(ref.id == "publisher" && configuration == publisher)
    return ref
  }

  @Test func theOfferIsReadyBeforeGroupMediaAndLeavesWithIt() throws {
    var m = GroupCallMachine(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), video: false, iceServers: [],
      offersAhead: true)
    let ref = try #require(Self.creating(&m))
    #expect(m.handle(.connectionMade(ref)) == [.createOffer(ref)])
    let offer = SessionDescription(sdp: "offer-pub")
    #expect(m.handle(.descriptionCreated(ref, offer)) == [.setLocal(ref, offer, .offer)])
    let early = IceCandidate(candidate: "c-local")
    #expect(m.handle(.localCandidate(ref, early)).isEmpty)
    // Set, but held: no group-media yet (the server may not have joined the SFU).
    #expect(m.handle(.localDescriptionSet(ref)).isEmpty)
    #expect(m.handle(.localCandidate(ref, nil)).isEmpty)
    #expect(m.handle(Self.joined) == [.notify(.participants(Self.state)), .notify(.state(.joined))])
    #expect(
      m.handle(Self.media) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-pub"))),
        .send(.groupCandidate(.init(callId: Self.callId, stream: "publisher", candidate: early))),
        .send(.groupEndOfCandidates(.init(callId: Self.callId, stream: "publisher"))),
      ])
    // A second group-media changes nothing; the answer is applied as usual.
    #expect(m.handle(Self.media).isEmpty)
    let answer = SessionDescription(sdp: "answer-sfu")
    #expect(
      m.handle(.server(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: answer.sdp))))
        == [.setRemote(ref, answer, .answer)])
  }

  @Test func anOfferStillBeingMadeLeavesOnceSet() throws {
    let invite = ServerMessage.GroupInvite(
      callId: Self.callId, from: Self.bob, video: false, memberCount: 2, createdAt: 1, group: Self.state)
    var m = GroupCallMachine(
      callId: Self.callId, entry: .invited(invite), video: false, iceServers: [], offersAhead: true)
    // A ring only prepares; answering it makes the publisher.
    #expect(
      m.handle(.start) == [.prepareConnections([Self.publisher]), .send(.groupRinging(.init(callId: Self.callId)))])
    let joining = m.handle(.join)
    #expect(joining.prefix(2) == [.notify(.state(.joining)), .request(.groupJoin(.init(callId: Self.callId)))])
    guard case .makeConnection(let ref, _)? = joining.last, joining.count == 3 else {
      Issue.record("no publisher: \(joining)")
      return
    }
    _ = m.handle(Self.joined)
    #expect(m.handle(Self.media).isEmpty)  // its connection is still being made
    #expect(m.handle(.connectionMade(ref)) == [.createOffer(ref)])
    let offer = SessionDescription(sdp: "offer-pub")
    #expect(m.handle(.descriptionCreated(ref, offer)) == [.setLocal(ref, offer, .offer)])
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-pub")))
      ])
  }

  @Test func liveKitClosesThePublisherMadeAhead() throws {
    var m = GroupCallMachine(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), video: false, iceServers: [],
      offersAhead: true)
    let ref = try #require(Self.creating(&m))
    #expect(m.handle(.connectionMade(ref)) == [.createOffer(ref)])
    _ = m.handle(Self.joined)
    let liveKit = GroupCallMachine.Event.server(
      .groupMedia(.init(callId: Self.callId, sfu: .livekit, url: "wss://lk", token: "t")))
    #expect(m.handle(liveKit) == [.close(ref), .notify(.liveKit(url: "wss://lk", token: "t"))])
    #expect(!m.has(ref))
    // Its offer, created meanwhile, goes nowhere.
    #expect(m.handle(.descriptionCreated(ref, SessionDescription(sdp: "late"))).isEmpty)
  }

  @Test func aPublisherThatCouldNotBeMadeIsMadeAgainOnGroupMedia() throws {
    var m = GroupCallMachine(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), video: false, iceServers: [],
      offersAhead: true)
    let ref = try #require(Self.creating(&m))
    #expect(m.handle(.connectionFailed(ref, "no pipeline")) == [.notify(.error("could not publish: no pipeline"))])
    _ = m.handle(Self.joined)
    let again = m.handle(Self.media)
    guard case .makeConnection(let fresh, let configuration)? = again.first, again.count == 1 else {
      Issue.record("no second publisher: \(again)")
      return
    }
    #expect(fresh != ref && fresh.id == "publisher" && configuration == Self.publisher)
  }
}
