import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let groupId = "3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a"
private let groupUUID = UUID(uuidString: groupId) ?? UUID()
/// The id a room is joined with (its OS call's UUID), and the room's live call id on the server.
private let proposedId = "5e4d3c2b-1a09-4f8e-8d7c-6b5a4f3e2d1c"
private let proposedUUID = UUID(uuidString: proposedId) ?? UUID()
private let liveId = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d"
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

private func action(_ kind: SystemCallAction.Kind, _ uuid: UUID = groupUUID) -> SystemCallAction {
  SystemCallAction(id: UUID(), callUUID: uuid, kind: kind, timeoutDate: t0.addingTimeInterval(10))
}

/// The call Bob created, as the server shows it: Alice and Carol in `others`' state.
private func created(_ others: GroupMemberState) -> GroupCallState {
  GroupCallState(
    callId: groupId, creatorId: "bob", title: "Standup", video: false, state: .active, createdAt: 1_732_880_000_000,
    members: [
      GroupMember(userId: "bob", state: .joined, deviceId: "bob-phone"),
      GroupMember(userId: "alice", state: others),
      GroupMember(userId: "carol", state: .ringing),
    ])
}

/// The coordinator on Bob's phone, driven event by event at virtual time `t0`.
private struct Machine {
  var coordinator = SystemCallCoordinator(deviceId: "bob-phone")

  @discardableResult
  mutating func on(_ event: SystemCallCoordinator.Event) -> [SystemCallCoordinator.Effect] {
    coordinator.handle(event, now: t0)
  }

  /// Bob starts "Standup" with Alice and Carol, and the OS performs the start-call action.
  @discardableResult
  mutating func started(video: Bool = false) -> [SystemCallCoordinator.Effect] {
    on(.startGroup(callId: groupId, members: ["alice", "carol"], title: "Standup", video: video))
    return on(.action(action(.startCall)))
  }

  /// Bob joins room "standup", the OS performs the start-call action, the server answers with
  /// the room's live call.
  mutating func joinedRoom() {
    on(.joinRoom(callId: proposedId, room: "standup", video: false))
    on(.action(action(.startCall, proposedUUID)))
    on(.roomJoined(proposed: proposedId, callId: liveId))
  }
}

@Suite struct SystemCallOutgoingGroupTests {
  // A group call the app starts is requested from the OS first; the start-call action prepares
  // audio, creates the call and is fulfilled; joined is reported as "started connecting", this
  // device's media up as connected. Audio starts only in didActivate.
  @Test func startingAGroupCallGoesThroughTheOSLikeADial() throws {
    var m = Machine()
    #expect(
      m.on(.startGroup(callId: groupId, members: ["alice", "carol"], title: "Standup", video: false))
        == [.request(.startCall(uuid: groupUUID, handle: "alice, carol", displayName: "Standup", video: false))])
    let call = try #require(m.coordinator.call(groupId))
    #expect(call.isGroup && call.direction == .outgoing && call.stage == .dialing && !call.shown)
    // Nothing goes to the server before the OS performs the action.
    let start = action(.startCall)
    #expect(
      m.on(.action(start))
        == [
          .prepareAudio(video: false),
          .createGroup(groupId, members: ["alice", "carol"], title: "Standup", video: false),
          .fulfill(actionId: start.id),
        ])
    #expect(m.on(.groupState(groupId, .joining)).isEmpty)
    #expect(m.on(.groupState(groupId, .joined)) == [.reportOutgoingStartedConnecting(groupUUID)])
    #expect(m.on(.groupMedia(groupId, .checking)).isEmpty)
    #expect(m.on(.groupMedia(groupId, .connected)) == [.reportOutgoingConnected(groupUUID)])
    #expect(m.coordinator.call(groupId)?.stage == .connected)
    #expect(m.on(.groupMedia(groupId, .connected)).isEmpty)
    #expect(m.on(.audioActivated) == [.audioActivated])

    // A second start for the same call is failed; a video call starts the camera.
    let again = action(.startCall)
    #expect(m.on(.action(again)) == [.fail(actionId: again.id)])
    var video = Machine()
    video.on(.startGroup(callId: groupId, members: ["alice"], title: nil, video: true))
    let videoStart = action(.startCall)
    #expect(
      video.on(.action(videoStart))
        == [
          .prepareAudio(video: true), .createGroup(groupId, members: ["alice"], title: nil, video: true), .startCamera,
          .fulfill(actionId: videoStart.id),
        ])
  }

  // LiveKit: "connected" is the app's room; without a publisher state first, both are reported.
  @Test func aStartedLiveKitCallIsConnectedWhenItsRoomIs() {
    var m = Machine()
    m.started()
    #expect(
      m.on(.groupLiveKit(groupId, url: "wss://lk", token: "t"))
        == [.connectGroupMedia(groupId, url: "wss://lk", token: "t", video: false, muted: false)])
    #expect(
      m.on(.groupMedia(groupId, .connected))
        == [.reportOutgoingStartedConnecting(groupUUID), .reportOutgoingConnected(groupUUID)])
  }

  // A start-call the OS refuses removes the call without a report; nothing was sent.
  @Test func aRefusedStartRemovesTheGroupCall() {
    var m = Machine()
    m.on(.startGroup(callId: groupId, members: ["alice"], title: nil, video: false))
    #expect(
      m.on(.transactionFailed(.startCall(uuid: groupUUID, handle: "alice", displayName: nil, video: false))).isEmpty)
    #expect(m.coordinator.activeCalls.isEmpty)
  }

  // End cancels a call created here while nobody else has joined (members still ringing), and
  // leaves it once someone has: it goes on for them.
  @Test func endingACreatedCallCancelsItUntilSomeoneElseJoined() {
    var m = Machine()
    m.started()
    #expect(m.on(.groupParticipants(groupId, created(.ringing))).isEmpty)
    var cancelled = m
    let end = action(.end)
    #expect(cancelled.on(.action(end)) == [.endGroupForAll(groupId), .fulfill(actionId: end.id)])
    #expect(cancelled.coordinator.activeCalls.isEmpty)

    m.on(.groupParticipants(groupId, created(.joined)))
    // Someone who joined and left already counts.
    var left = m
    left.on(.groupParticipants(groupId, created(.left)))
    #expect(left.on(.action(end)) == [.leaveGroup(groupId), .fulfill(actionId: end.id)])
    #expect(m.on(.action(end)) == [.leaveGroup(groupId), .fulfill(actionId: end.id)])
  }

  // Mute goes to the group call; hold is refused, as for group rings.
  @Test func muteGoesToTheStartedGroupCall() {
    var m = Machine()
    m.started()
    let mute = action(.setMuted(true))
    #expect(m.on(.action(mute)) == [.setGroupMuted(groupId, true), .fulfill(actionId: mute.id)])
    #expect(m.coordinator.call(groupId)?.muted == true)
    let hold = action(.setHeld(true))
    #expect(m.on(.action(hold)) == [.fail(actionId: hold.id)])
  }

  // Endings the OS did not ask for: a create the server refused, media failed, the call ended.
  @Test func startedGroupCallEndingsAreReported() {
    var refused = Machine()
    refused.started()
    #expect(refused.on(.groupState(groupId, .ended(nil))) == [.reportEnded(groupUUID, .failed)])
    var failed = Machine()
    failed.started()
    failed.on(.groupState(groupId, .joined))
    #expect(failed.on(.groupMedia(groupId, .failed)) == [.reportEnded(groupUUID, .failed), .leaveGroup(groupId)])
    var ended = Machine()
    ended.started()
    #expect(ended.on(.groupState(groupId, .ended(.completed))) == [.reportEnded(groupUUID, .remoteEnded)])
    // A reset cancels the ring over signaling; signaling stopped sends nothing.
    var reset = Machine()
    reset.started()
    #expect(reset.on(.reset) == [.endGroupForAll(groupId), .audioDeactivated])
  }

  // A room: the start-call action joins it with the proposed id; the server's live call id is
  // mapped to the proposed id's UUID, which the OS keeps; its events, mute and end use it.
  @Test func aRoomKeepsTheProposedUUIDAndMapsTheServersCallId() {
    var m = Machine()
    #expect(
      m.on(.joinRoom(callId: proposedId, room: "standup", video: false))
        == [.request(.startCall(uuid: proposedUUID, handle: "standup", displayName: "standup", video: false))])
    let start = action(.startCall, proposedUUID)
    #expect(
      m.on(.action(start))
        == [
          .prepareAudio(video: false), .joinRoom(proposedId, room: "standup", video: false),
          .fulfill(actionId: start.id),
        ])
    #expect(m.on(.roomJoined(proposed: proposedId, callId: liveId)).isEmpty)
    #expect(m.coordinator.uuid(for: liveId) == proposedUUID)
    #expect(m.coordinator.call(liveId)?.uuid == proposedUUID)
    #expect(m.coordinator.call(liveId)?.callId == liveId)
    #expect(m.on(.groupState(liveId, .joined)) == [.reportOutgoingStartedConnecting(proposedUUID)])
    #expect(m.on(.groupMedia(liveId, .connected)) == [.reportOutgoingConnected(proposedUUID)])
    let mute = action(.setMuted(true), proposedUUID)
    #expect(m.on(.action(mute)) == [.setGroupMuted(liveId, true), .fulfill(actionId: mute.id)])
    // A room is left, never ended for all, even when nobody else is in it.
    let end = action(.end, proposedUUID)
    #expect(m.on(.action(end)) == [.leaveGroup(liveId), .fulfill(actionId: end.id)])
    #expect(m.coordinator.aliases.isEmpty)

    // The same id: no alias.
    var same = Machine()
    same.on(.joinRoom(callId: proposedId, room: "standup", video: false))
    same.on(.action(action(.startCall, proposedUUID)))
    #expect(same.on(.roomJoined(proposed: proposedId, callId: proposedId)).isEmpty)
    #expect(same.coordinator.aliases.isEmpty && same.coordinator.call(proposedId)?.awaitingRoom == false)
  }

  // A room join the server refuses ends the OS call as failed; one ended in the OS UI while the
  // join was in flight sends nothing then, and leaves the room once the join is answered.
  @Test func aRoomJoinRefusedOrEndedInFlight() {
    var refused = Machine()
    refused.on(.joinRoom(callId: proposedId, room: "standup", video: false))
    refused.on(.action(action(.startCall, proposedUUID)))
    #expect(refused.on(.roomJoined(proposed: proposedId, callId: nil)) == [.reportEnded(proposedUUID, .failed)])
    #expect(refused.coordinator.activeCalls.isEmpty)

    var ended = Machine()
    ended.on(.joinRoom(callId: proposedId, room: "standup", video: false))
    ended.on(.action(action(.startCall, proposedUUID)))
    let end = action(.end, proposedUUID)
    #expect(ended.on(.action(end)) == [.fulfill(actionId: end.id)])
    #expect(ended.on(.roomJoined(proposed: proposedId, callId: liveId)) == [.leaveGroup(liveId)])
    #expect(ended.coordinator.activeCalls.isEmpty)

    // A joined room's events are those of the live call only.
    var joined = Machine()
    joined.joinedRoom()
    #expect(joined.on(.groupState(liveId, .ended(.ended))) == [.reportEnded(proposedUUID, .remoteEnded)])
  }
}
