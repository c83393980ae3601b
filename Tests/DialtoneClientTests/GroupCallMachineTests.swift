import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

/// `GroupCallMachine` driven directly: each stream's negotiation, candidates on both sides
/// waiting for their description, streams that end while being made, and leaving.
@Suite struct GroupCallMachineTests {
  static let callId = "g-1"
  static let bob = Peer(userId: "bob", deviceId: "laptop")
  static let state = GroupCallState(
    callId: callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
    members: [GroupMember(userId: "alice", state: .joined), GroupMember(userId: "bob", state: .joined)])
  typealias Ref = GroupCallMachine.StreamRef

  /// A call this device created, joined.
  static func joined(video: Bool = false) -> GroupCallMachine {
    var m = GroupCallMachine(callId: callId, entry: .create(members: ["bob"], title: nil), video: video, iceServers: [])
    _ = m.handle(.start)
    _ = m.handle(.replied(.ack(.init(replyTo: "r", callId: callId, group: state))))
    return m
  }

  static func offer(_ stream: String, _ sdp: String = "offer-sfu") -> GroupCallMachine.Event {
    .server(.groupOffer(.init(callId: callId, stream: stream, sdp: sdp, from: bob)))
  }

  static func candidate(_ stream: String, _ line: String) -> GroupCallMachine.Event {
    .server(.groupCandidate(.init(callId: callId, stream: stream, candidate: IceCandidate(candidate: line))))
  }

  @Test func creatingAsksTheServerAndJoinsWithItsAnswer() {
    var m = GroupCallMachine(
      callId: Self.callId, entry: .create(members: ["bob"], title: "t"), video: false, iceServers: [])
    #expect(m.state == .joining)
    #expect(
      m.handle(.start) == [
        .prepareConnections([PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)]),
        .request(.groupCreate(.init(callId: Self.callId, members: ["bob"], video: false, title: "t"))),
      ])
    #expect(
      m.handle(.replied(.ack(.init(replyTo: "r", callId: Self.callId, group: Self.state))))
        == [.notify(.participants(Self.state)), .notify(.state(.joined))])
    #expect(m.state == .joined && m.joinedAs == Self.callId)
    // A refusal ends it, with the server's reason for the app.
    var refused = GroupCallMachine(callId: Self.callId, entry: .join, video: false, iceServers: [])
    _ = refused.handle(.start)
    #expect(
      refused.handle(.replied(.error(.init(replyTo: "r", code: .notFound, message: "no such call"))))
        == [.notify(.error("not-found: no such call")), .finish(.ended(nil))])
    #expect(refused.joinedAs == nil)
  }

  // The publisher: made, offered, answered; its candidates follow the offer, the SFU's follow
  // the answer.
  @Test func thePublisherOffersAndCandidatesWaitForTheirDescriptions() {
    var m = Self.joined()
    let made = m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus))))
    guard case .makeConnection(let ref, let configuration)? = made.first else {
      Issue.record("no connection: \(made)")
      return
    }
    #expect(
      ref.id == "publisher"
        && configuration == PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true))
    #expect(m.handle(.setMuted(true)).isEmpty)  // nothing to mute yet: the connection is made muted
    #expect(m.handle(.connectionMade(ref)) == [.setAudio(ref, false), .createOffer(ref)])
    let offer = SessionDescription(sdp: "offer-pub")
    #expect(m.handle(.descriptionCreated(ref, offer)) == [.setLocal(ref, offer, .offer)])
    let early = IceCandidate(candidate: "c-local")
    #expect(m.handle(.localCandidate(ref, early)).isEmpty)
    #expect(m.handle(Self.candidate("publisher", "c-sfu")).isEmpty)
    #expect(
      m.handle(.localDescriptionSet(ref)) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-pub"))),
        .send(.groupCandidate(.init(callId: Self.callId, stream: "publisher", candidate: early))),
      ])
    #expect(
      m.handle(.localCandidate(ref, nil))
        == [.send(.groupEndOfCandidates(.init(callId: Self.callId, stream: "publisher")))])
    let answer = SessionDescription(sdp: "answer-sfu")
    #expect(
      m.handle(.server(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: answer.sdp))))
        == [.setRemote(ref, answer, .answer)])
    #expect(m.handle(.remoteDescriptionSet(ref)) == [.addCandidate(ref, IceCandidate(candidate: "c-sfu"))])
    #expect(m.handle(Self.candidate("publisher", "c-late")) == [.addCandidate(ref, IceCandidate(candidate: "c-late"))])
    #expect(m.handle(.setMuted(false)) == [.setAudio(ref, true)])
    // A second answer changes nothing.
    #expect(m.handle(.server(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: "again")))).isEmpty)
  }

  @Test func aVideoPublisherSendsOnlyItsCamera() {
    var m = Self.joined(video: true)
    guard
      case .makeConnection(let ref, _)? = m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus)))).first
    else { return }
    #expect(
      m.handle(.connectionMade(ref)) == [.setVideoDirection(ref, .sendonly), .setVideo(ref, true), .createOffer(ref)])
  }

  // An offered stream: its own receive-only connection, the SFU's offer applied, answered.
  @Test func anOfferedStreamIsAnswered() {
    var m = Self.joined()
    guard case .makeConnection(let ref, let configuration)? = m.handle(Self.offer("feed-9")).first else {
      Issue.record("no connection")
      return
    }
    #expect(configuration == PeerConnectionConfiguration(iceServers: [], video: false, remoteParticipant: Self.bob))
    #expect(m.handle(Self.offer("feed-9", "again")).isEmpty)  // one connection per stream
    #expect(m.handle(Self.candidate("feed-9", "c-early")).isEmpty)
    #expect(
      m.handle(.connectionMade(ref)) == [
        .notify(.remoteStreamAdded(ref, from: Self.bob)), .setRemote(ref, SessionDescription(sdp: "offer-sfu"), .offer),
      ])
    #expect(
      m.handle(.remoteDescriptionSet(ref)) == [
        .addCandidate(ref, IceCandidate(candidate: "c-early")), .createAnswer(ref),
      ])
    let answer = SessionDescription(sdp: "answer-me")
    #expect(m.handle(.descriptionCreated(ref, answer)) == [.setLocal(ref, answer, .answer)])
    #expect(
      m.handle(.localDescriptionSet(ref))
        == [.send(.groupAnswer(.init(callId: Self.callId, stream: "feed-9", sdp: "answer-me")))])
    #expect(
      m.handle(.connectionState(ref, .connected)) == [
        .notify(.remoteStreamState(stream: "feed-9", from: Self.bob, .connected))
      ])
    #expect(
      m.handle(.server(.groupStreamEnded(.init(callId: Self.callId, stream: "feed-9"))))
        == [.close(ref), .notify(.remoteStreamRemoved(stream: "feed-9", from: Self.bob))])
  }

  // A stream that ends while its connection is made is closed once it exists; a new stream of
  // the same id is another stream, and the old connection's events do not touch it.
  @Test func aStreamEndedWhileBeingMadeClosesAndItsIdMayComeBack() {
    var m = Self.joined()
    guard case .makeConnection(let old, _)? = m.handle(Self.offer("feed-9")).first else { return }
    #expect(m.handle(.server(.groupStreamEnded(.init(callId: Self.callId, stream: "feed-9")))).isEmpty)
    guard case .makeConnection(let new, _)? = m.handle(Self.offer("feed-9", "offer-2")).first else {
      Issue.record("the id could not come back")
      return
    }
    #expect(new != old && new.id == old.id)
    #expect(m.handle(.connectionMade(old)) == [.close(old)])
    #expect(m.handle(.connectionState(old, .failed)).isEmpty)
    #expect(m.handle(.connectionMade(new)).contains(.setRemote(new, SessionDescription(sdp: "offer-2"), .offer)))
  }

  // Leaving waits for the server a bounded while, then the call is over; meanwhile nothing but
  // the end matters.
  @Test func leavingIsSettledThenFinal() {
    var m = Self.joined()
    #expect(m.handle(.leave) == [.settle(.groupLeave(.init(callId: Self.callId)))])
    #expect(m.state == .joined)
    #expect(m.handle(.leave).isEmpty)
    #expect(m.handle(Self.offer("feed-1")).isEmpty)
    #expect(m.handle(.settled) == [.finish(.ended(nil))])
    #expect(m.state == .ended(nil))
    #expect(m.handle(.start).isEmpty)

    var ringing = GroupCallMachine(
      callId: Self.callId,
      entry: .invited(
        .init(callId: Self.callId, from: Self.bob, video: false, memberCount: 2, createdAt: 1, group: Self.state)),
      video: false, iceServers: [])
    #expect(
      ringing.handle(.start) == [
        .prepareConnections([PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)]),
        .send(.groupRinging(.init(callId: Self.callId))),
      ])
    #expect(ringing.handle(.leave) == [.settle(.groupDecline(.init(callId: Self.callId)))])
    // The server's end while the decline is on its way is the one that counts.
    #expect(
      ringing.handle(.server(.groupEnded(.init(callId: Self.callId, reason: .cancelled))))
        == [.finish(.ended(.cancelled))])
    #expect(ringing.handle(.settled).isEmpty)
  }

  @Test func invitingAndRemovingAskTheServerAndReportItsAnswer() {
    var m = Self.joined()
    #expect(m.handle(.invite(["dave"])) == [.ask(.groupInvite(.init(callId: Self.callId, members: ["dave"])))])
    #expect(m.handle(.remove("bob")) == [.ask(.groupRemove(.init(callId: Self.callId, userId: "bob")))])
    let grown = GroupCallState(
      callId: Self.callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
      members: Self.state.members + [GroupMember(userId: "dave", state: .invited)])
    #expect(
      m.handle(.asked(.ack(.init(replyTo: "i", callId: Self.callId, group: grown)))) == [.notify(.participants(grown))])
    #expect(m.group == grown)
    // A refusal is the app's to show; the call goes on.
    #expect(
      m.handle(.asked(.error(.init(replyTo: "r", code: .forbidden, message: "only the owner"))))
        == [.notify(.error("forbidden: only the owner"))])
    #expect(m.handle(.askFailed("socket closed")) == [.notify(.error("socket closed"))])
    #expect(m.state == .joined)
    // Not in the call: nothing is asked.
    var ringing = GroupCallMachine(
      callId: Self.callId,
      entry: .invited(
        .init(callId: Self.callId, from: Self.bob, video: false, memberCount: 2, createdAt: 1, group: Self.state)),
      video: false, iceServers: [])
    guard case .notify(.error)? = ringing.handle(.invite(["dave"])).first else {
      Issue.record("a ringing device invited")
      return
    }
  }

  @Test func beingRemovedEndsTheCallWithTheReason() {
    var m = Self.joined()
    _ = m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus))))
    #expect(
      m.handle(.server(.groupEnded(.init(callId: Self.callId, reason: .removed, from: Self.bob))))
        == [.finish(.ended(.removed))])
    #expect(m.state == .ended(.removed))
    #expect(m.handle(.invite(["dave"])).isEmpty)
  }

  // Only the group desk's messages of this call reach the switch.
  @Test func otherMessagesAreIgnored() {
    var m = Self.joined()
    #expect(m.handle(.server(.mediaState(.init(callId: Self.callId, from: Self.bob, camera: false)))).isEmpty)
    #expect(m.handle(.server(.groupUpdate(.init(callId: "other", group: Self.state)))).isEmpty)
    #expect(
      m.handle(.server(.groupUpdate(.init(callId: Self.callId, group: Self.state)))) == [
        .notify(.participants(Self.state))
      ])
  }
}
