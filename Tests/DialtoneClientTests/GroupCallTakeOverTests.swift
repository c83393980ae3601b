import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneClient

/// The call's media moved to a fresh SFU room (another server node took the call over,
/// protocol.md 20.11): `group-media` with `restart: connection` to a device in the call. It
/// stays in the call, replaces its publisher with a fresh connection and drops what it received.
@Suite struct GroupCallTakeOverTests {
  typealias Ref = GroupCallMachine.StreamRef
  static let callId = GroupCallMachineTests.callId
  static let bob = GroupCallMachineTests.bob

  @Test func aDeviceInTheCallPublishesAfreshAndDropsWhatItReceived() {
    var (m, publisher) = GroupCallRecoveryTests.publishing(canRestartIce: false)
    let feed = GroupCallRecoveryTests.receiving(&m, canRestartIce: false)
    // The old room's connections are dying: the feed's recovery timer is armed.
    let armed = m.handle(.connectionState(feed, .disconnected))
    guard case .arm(let token, _)? = armed.last else {
      Issue.record("no recovery timer armed: \(armed)")
      return
    }
    let moved = m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus, restart: .connection))))
    let fresh = Ref(id: "publisher", generation: feed.generation + 1)
    #expect(
      moved == [
        .cancel(token), .close(feed), .notify(.remoteStreamRemoved(stream: "feed-9", from: Self.bob)),
        .close(publisher),
        .makeConnection(fresh, PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)),
      ])
    // Nothing left of the old connections reacts any more.
    #expect(m.handle(.timerFired(token)).isEmpty)
    #expect(m.handle(.connectionState(feed, .failed)).isEmpty)
    // The fresh publisher's offer says it replaces the old one.
    #expect(m.handle(.connectionMade(fresh, canRestartIce: false)) == [.createOffer(fresh)])
    let offer = SessionDescription(sdp: "offer-new-room")
    _ = m.handle(.descriptionCreated(fresh, offer))
    #expect(
      m.handle(.localDescriptionSet(fresh)) == [
        .send(.groupOffer(.init(callId: Self.callId, stream: "publisher", sdp: "offer-new-room", restart: .connection)))
      ])
    // Bob's feed in the new room is a new stream, on a new connection.
    guard case .makeConnection(let again, _)? = m.handle(GroupCallMachineTests.offer("feed-12")).first else {
      Issue.record("bob's new feed made no connection")
      return
    }
    #expect(again.id == "feed-12")
  }

  /// On one subscriber connection: the next `subscriber` offer makes a new connection rather
  /// than renegotiating the dead one.
  @Test func theSubscriberConnectionIsMadeAgainFromTheNewRoomsOffer() {
    var (m, _) = GroupCallRecoveryTests.publishing(canRestartIce: true)
    let sections = [GroupStreamSection(mid: "0", kind: .audio, from: Self.bob)]
    let first = m.handle(
      .server(.groupOffer(.init(callId: Self.callId, stream: "subscriber", sdp: "sub-1", streams: sections))))
    guard case .makeConnection(let subscriber, _)? = first.first else {
      Issue.record("no subscriber connection")
      return
    }
    _ = m.handle(.connectionMade(subscriber, canRestartIce: true))
    let moved = m.handle(
      .server(.groupMedia(.init(callId: Self.callId, sfu: .janus, multistream: true, restart: .connection))))
    #expect(moved.contains(.close(subscriber)))
    #expect(moved.contains(.notify(.remoteStreamRemoved(stream: "subscriber", from: Self.bob))))
    let again = m.handle(
      .server(.groupOffer(.init(callId: Self.callId, stream: "subscriber", sdp: "sub-new-room", streams: sections))))
    guard case .makeConnection(let fresh, _)? = again.first else {
      Issue.record("the new room's subscriber offer made no connection: \(again)")
      return
    }
    #expect(fresh.id == "subscriber" && fresh != subscriber)
  }

  /// A `group-media` without `restart` repeated to a device that publishes already changes nothing.
  @Test func aRepeatedGroupMediaWithoutRestartIsIgnored() {
    var (m, _) = GroupCallRecoveryTests.publishing(canRestartIce: true)
    #expect(m.handle(.server(.groupMedia(.init(callId: Self.callId, sfu: .janus)))).isEmpty)
  }
}
