import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let groupId = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
private let groupUUID = UUID(uuidString: groupId) ?? UUID()
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

/// A group ring's VoIP push: the caller fields describe the creator (Alice).
func groupPushPayload(
  _ id: String = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d", title: String? = "Standup", video: Bool = false
) -> [AnyHashable: Any] {
  var payload: [AnyHashable: Any] = [
    "dialtone": 1, "type": "incoming-call", "callId": id, "callerId": "alice", "callerDeviceId": "phone",
    "callerName": "Alice", "callerHandle": "alice", "hasVideo": video, "createdAt": 1_732_880_000_000,
    "memberCount": 3,
  ]
  if let title { payload["title"] = title }
  return payload
}

/// The group call as `get-group` shows it, with Bob (this user) in `bob`'s state.
func groupState(
  _ phase: GroupPhase, bob: GroupMemberState, bobDevice: String? = nil, reason: GroupEndReason? = nil,
  id: String = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
) -> GroupCallState {
  GroupCallState(
    callId: id, creatorId: "alice", title: "Standup", video: false, state: phase, createdAt: 1_732_880_000_000,
    endReason: reason,
    members: [
      GroupMember(userId: "alice", state: phase == .ended ? .left : .joined, deviceId: "phone"),
      GroupMember(userId: "bob", state: bob, deviceId: bobDevice),
      GroupMember(userId: "carol", state: .ringing),
    ])
}

private func action(_ kind: SystemCallAction.Kind, _ uuid: UUID = groupUUID, timeout: Double = 10)
  -> SystemCallAction
{
  SystemCallAction(id: UUID(), callUUID: uuid, kind: kind, timeoutDate: t0.addingTimeInterval(timeout))
}

private let inviteReport = IncomingCallReport(
  uuid: groupUUID, callId: groupId, handle: "alice", displayName: "Standup", hasVideo: false, origin: .invite,
  isGroup: true)

/// The coordinator on Bob's phone, driven event by event at virtual time `t0`.
private struct Machine {
  var coordinator = SystemCallCoordinator(deviceId: "bob-phone")

  @discardableResult
  mutating func on(_ event: SystemCallCoordinator.Event) -> [SystemCallCoordinator.Effect] {
    coordinator.handle(event, now: t0)
  }

  /// The push's report, as the OS would be given it inside PushKit's delegate method.
  func plan(video: Bool = false) -> IncomingCallReport? {
    SystemCallCoordinator.reportPlan(for: groupPushPayload(video: video), ledger: coordinator.ledger)
  }

  /// A group push, reported and accepted by the OS.
  @discardableResult
  mutating func pushed(video: Bool = false) -> [SystemCallCoordinator.Effect] {
    guard let report = plan(video: video) else { return [] }
    return on(.reported(report, accepted: true))
  }

  /// A `group-invite` over signaling, reported and accepted by the OS.
  mutating func invited(video: Bool = false) {
    on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: video))
    var report = inviteReport
    report.hasVideo = video
    on(.reported(report, accepted: true))
  }

  /// Answered in the OS UI; returns the answer action's id.
  mutating func answered(timeout: Double = 10) -> UUID {
    let answer = action(.answer, timeout: timeout)
    on(.action(answer))
    return answer.id
  }
}

@Suite struct SystemCallGroupTests {
  // Rule 1 for group rings: the push is reported from the payload alone, with the title (or the
  // creator's name) and video; only the report's answer connects, and asks `get-group`.
  @Test func aGroupPushIsReportedWithItsTitleThenResolvedWithGetGroup() throws {
    let ledger = SystemCallCoordinator.PushLedger()
    let report = try #require(SystemCallCoordinator.reportPlan(for: groupPushPayload(video: true), ledger: ledger))
    #expect(
      report
        == IncomingCallReport(
          uuid: groupUUID, callId: groupId, handle: "alice", displayName: "Standup", hasVideo: true, origin: .push,
          isGroup: true))
    let untitled = SystemCallCoordinator.reportPlan(for: groupPushPayload(title: nil), ledger: ledger)
    #expect(untitled?.displayName == "Alice" && untitled?.isGroup == true)
    #expect(SystemCallCoordinator.reportPlan(for: groupPushPayload(title: ""), ledger: ledger)?.displayName == "Alice")
    // FCM-style strings work the same.
    let strings: [AnyHashable: Any] = [
      "dialtone": "1", "type": "incoming-call", "callId": groupId, "callerId": "alice", "hasVideo": "false",
      "createdAt": "1732880000000", "memberCount": "4", "title": "Standup",
    ]
    #expect(SystemCallCoordinator.reportPlan(for: strings, ledger: ledger)?.isGroup == true)
    // A 1:1 push is not a group ring.
    #expect(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: ledger)?.isGroup == false)

    var m = Machine()
    #expect(m.pushed() == [.arm(.pushResolution(groupUUID), at: t0.addingTimeInterval(30)), .resolveGroup(groupId)])
    let call = try #require(m.coordinator.call(groupId))
    #expect(call.isGroup && call.pushed && call.stage == .ringing)
    // A push the OS refuses (Do Not Disturb) leaves the device quiet: nothing is asked.
    var refused = Machine()
    let plan = try #require(refused.plan())
    #expect(refused.on(.reported(plan, accepted: false)).isEmpty)
    #expect(refused.coordinator.activeCalls.isEmpty)
  }

  // A group-invite is reported (once), and answers the pushed ring's question.
  @Test func aGroupInviteIsReportedUnlessAPushDid() {
    var m = Machine()
    #expect(
      m.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
        == [.reportIncoming(inviteReport)])
    #expect(m.on(.reported(inviteReport, accepted: true)).isEmpty)
    #expect(m.coordinator.call(groupId)?.shown == true)
    // Re-delivered: nothing new.
    #expect(m.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false)).isEmpty)

    // Pushed first: the invite (replayed when the device connects) is not reported again.
    var pushed = Machine()
    pushed.pushed()
    #expect(
      pushed.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
        == [.cancel(.pushResolution(groupUUID))])
    #expect(pushed.coordinator.call(groupId)?.inviteReceived == true)

    // The OS refuses the invite's report (Do Not Disturb, blocked): the ring is declined.
    var refused = Machine()
    refused.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
    #expect(refused.on(.reported(inviteReport, accepted: false)) == [.declineGroup(groupId)])
    #expect(refused.coordinator.activeCalls.isEmpty)
  }

  // The race of a push and an invite for the same group call, both ways round: one call on
  // screen, never a decline, and whichever report the OS accepted shows it.
  @Test func aPushAndAnInviteForTheSameGroupCallShowOneCall() throws {
    // The invite's report is made, then the push's (synchronously, as PushKit requires);
    // the OS accepts the first and refuses the second as a duplicate.
    var m = Machine()
    #expect(
      m.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
        == [.reportIncoming(inviteReport)])
    let plan = try #require(m.plan())
    #expect(plan.uuid == inviteReport.uuid)
    #expect(m.on(.reported(inviteReport, accepted: true)).isEmpty)
    #expect(m.on(.reported(plan, accepted: false)).isEmpty)
    var call = try #require(m.coordinator.call(groupId))
    #expect(call.shown && call.pushed && call.inviteReceived && !call.awaitingResolution)

    // The same, but the OS answers the push's report first.
    var n = Machine()
    n.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
    let nPlan = try #require(n.plan())
    #expect(n.on(.reported(nPlan, accepted: true)).isEmpty)
    #expect(n.on(.reported(inviteReport, accepted: false)).isEmpty)
    call = try #require(n.coordinator.call(groupId))
    #expect(call.shown && call.pushed)

    // The push's report accepted first, then the invite's report refused as its duplicate.
    var o = Machine()
    o.pushed()
    o.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
    #expect(o.on(.reported(inviteReport, accepted: false)).isEmpty)
    #expect(o.coordinator.call(groupId)?.shown == true)
    // Either way answering joins once.
    #expect(o.on(.action(action(.answer))).contains(.joinGroup(groupId, video: false)))
  }

  // Rule 5 for group calls: Answer joins; the action is fulfilled once this device's media are
  // up (the publisher connection), not when the server accepts the join.
  @Test func answeringJoinsAndIsFulfilledOnceThisDevicesMediaAreUp() {
    var m = Machine()
    m.pushed(video: true)
    let answer = action(.answer, timeout: 8)
    #expect(
      m.on(.action(answer))
        == [
          .prepareAudio(video: true), .joinGroup(groupId, video: true), .startCamera,
          .arm(.answer(groupUUID), at: t0.addingTimeInterval(8)),
        ])
    #expect(m.coordinator.call(groupId)?.stage == .answering)
    #expect(m.on(.groupState(groupId, .joining)).isEmpty)
    #expect(m.on(.groupState(groupId, .joined)).isEmpty)
    #expect(m.on(.groupMedia(groupId, .checking)).isEmpty)
    #expect(
      m.on(.groupMedia(groupId, .connected))
        == [.cancel(.answer(groupUUID)), .fulfill(actionId: answer.id), .cancel(.pushResolution(groupUUID))])
    #expect(m.coordinator.call(groupId)?.stage == .connected)
    // A second answer for a connected call is simply done; a repeated state changes nothing.
    let again = action(.answer)
    #expect(m.on(.action(again)) == [.fulfill(actionId: again.id)])
    #expect(m.on(.groupMedia(groupId, .connected)).isEmpty)
    // Audio only when the OS activates it.
    #expect(m.on(.audioActivated) == [.audioActivated])
  }

  // Past the answer action's timeoutDate (or when the OS says it timed out) the call ends as
  // failed and is left; the action is never settled.
  @Test func aGroupAnswerPastItsDeadlineEndsAndLeaves() {
    var m = Machine()
    m.invited()
    let answer = m.answered(timeout: 7)
    #expect(
      m.on(.timerFired(.answer(groupUUID)))
        == [.cancel(.answer(groupUUID)), .reportEnded(groupUUID, .failed), .leaveGroup(groupId)])
    #expect(m.coordinator.activeCalls.isEmpty)
    // Media coming up now settles nothing.
    #expect(m.on(.groupMedia(groupId, .connected)).isEmpty)

    var n = Machine()
    n.invited()
    let timedOut = n.answered()
    #expect(
      n.on(.actionTimedOut(actionId: timedOut))
        == [.cancel(.answer(groupUUID)), .reportEnded(groupUUID, .failed), .leaveGroup(groupId)])
    #expect(answer != timedOut)
  }

  // End in the OS UI: a ring is declined, a joined (or joining) call is left; either way the
  // OS already knows, so nothing is reported.
  @Test func endingARingDeclinesAndEndingAJoinedCallLeaves() {
    var m = Machine()
    m.invited()
    let end = action(.end)
    #expect(m.on(.action(end)) == [.declineGroup(groupId), .fulfill(actionId: end.id)])
    #expect(m.coordinator.ledger.ended[groupId] == .remoteEnded)

    var pushed = Machine()
    pushed.pushed()
    let endPushed = action(.end)
    #expect(
      pushed.on(.action(endPushed))
        == [.cancel(.pushResolution(groupUUID)), .declineGroup(groupId), .fulfill(actionId: endPushed.id)])

    var joined = Machine()
    joined.invited()
    let answer = joined.answered()
    joined.on(.groupMedia(groupId, .connected))
    let endJoined = action(.end)
    #expect(joined.on(.action(endJoined)) == [.leaveGroup(groupId), .fulfill(actionId: endJoined.id)])

    // Ended while still joining: the pending answer fails, the join is undone.
    var joining = Machine()
    joining.invited()
    let pending = joining.answered()
    let endJoining = action(.end)
    #expect(
      joining.on(.action(endJoining))
        == [
          .cancel(.answer(groupUUID)), .fail(actionId: pending), .leaveGroup(groupId),
          .fulfill(actionId: endJoining.id),
        ])
    #expect(answer != pending)
  }

  // Every ending of the group call for this device ends the OS call with the matching reason.
  @Test func groupEndingsEndTheOSCallWithTheMatchingReason() {
    let cases: [(GroupEndReason?, SystemCallEndReason)] = [
      (.joinedElsewhere, .answeredElsewhere),
      (.declinedElsewhere, .declinedElsewhere),
      (.cancelled, .remoteEnded),
      (.missed, .unanswered),
      (.unanswered, .unanswered),
      (.ended, .remoteEnded),
      (.completed, .remoteEnded),
      (.mediaFailed, .failed),
      (.connectionLost, .failed),
      // Ended here without the OS asking: the join was refused.
      (nil, .failed),
    ]
    for (reason, expected) in cases {
      var m = Machine()
      m.invited()
      #expect(
        m.on(.groupState(groupId, .ended(reason))) == [.reportEnded(groupUUID, expected)],
        "\(String(describing: reason))")
      #expect(m.coordinator.activeCalls.isEmpty)
      #expect(m.coordinator.ledger.ended[groupId] == expected)
      if let reason { #expect(SystemCallEndReason(group: reason) == expected) }
    }
    // Ending while the answer is pending fails the action.
    var m = Machine()
    m.invited()
    let answer = m.answered()
    #expect(
      m.on(.groupState(groupId, .ended(.mediaFailed)))
        == [.cancel(.answer(groupUUID)), .fail(actionId: answer), .reportEnded(groupUUID, .failed)])
    // A late push for the ended group call is reported and ended at once.
    let late = SystemCallCoordinator.reportPlan(for: groupPushPayload(), ledger: m.coordinator.ledger)
    #expect(late?.endAtOnce == .failed)
  }

  // The get-group answer for a pushed group call: this user's member state first, then the call's.
  @Test func pushedGroupResolutionFollowsTheMemberState() {
    let cases: [(GroupCallState?, SystemCallEndReason?)] = [
      // Joined on another device (still in the call, or since left).
      (groupState(.active, bob: .joined, bobDevice: "bob-tablet"), .answeredElsewhere),
      (groupState(.active, bob: .left, bobDevice: "bob-tablet"), .answeredElsewhere),
      (groupState(.ended, bob: .left, bobDevice: "bob-tablet", reason: .completed), .answeredElsewhere),
      // Declined on another device.
      (groupState(.ringing, bob: .declined), .declinedElsewhere),
      (groupState(.ended, bob: .declined, reason: .unanswered), .declinedElsewhere),
      // The creator gave up before anyone joined (cancelling marks the ring missed).
      (groupState(.ended, bob: .missed, reason: .cancelled), .remoteEnded),
      // The ring timed out for Bob, whether or not the call goes on.
      (groupState(.active, bob: .missed), .unanswered),
      (groupState(.ended, bob: .missed, reason: .completed), .unanswered),
      // Ended for everyone.
      (groupState(.ended, bob: .left, bobDevice: "bob-phone", reason: .ended), .remoteEnded),
      (groupState(.ended, bob: .left, bobDevice: "bob-phone", reason: .mediaFailed), .failed),
      // Not found, no answer.
      (nil, .failed),
      // Still ringing Bob, or in the call on this device.
      (groupState(.ringing, bob: .invited), nil),
      (groupState(.active, bob: .ringing), nil),
      (groupState(.active, bob: .joined, bobDevice: "bob-phone"), nil),
      // Left on this device earlier: a stale ring.
      (groupState(.active, bob: .left, bobDevice: "bob-phone"), .remoteEnded),
    ]
    for (state, expected) in cases {
      #expect(
        SystemCallCoordinator.endReason(forPushedGroup: state, userId: "bob", ownDeviceId: "bob-phone") == expected,
        "\(String(describing: state))")
    }
    // Without this user's id only the call's phase counts.
    #expect(
      SystemCallCoordinator.endReason(
        forPushedGroup: groupState(.ended, bob: .missed, reason: .cancelled), userId: nil, ownDeviceId: "bob-phone")
        == .remoteEnded)
    #expect(
      SystemCallCoordinator.endReason(
        forPushedGroup: groupState(.active, bob: .declined), userId: nil, ownDeviceId: "bob-phone") == nil)
  }

  // Rule 1: a group call cancelled, or joined or declined on another device, before this device
  // connected is reported (by the push) and then ended with the matching reason.
  @Test func aGroupCallResolvedBeforeTheDeviceConnectedEndsWithTheMatchingReason() throws {
    let cases: [(GroupCallState, SystemCallEndReason)] = [
      (groupState(.ended, bob: .missed, reason: .cancelled), .remoteEnded),
      (groupState(.active, bob: .joined, bobDevice: "bob-tablet"), .answeredElsewhere),
      (groupState(.ringing, bob: .declined), .declinedElsewhere),
      (groupState(.active, bob: .missed), .unanswered),
    ]
    for (state, expected) in cases {
      var m = Machine()
      m.pushed()
      #expect(
        m.on(.groupResolved(groupId, state, userId: "bob"))
          == [.cancel(.pushResolution(groupUUID)), .reportEnded(groupUUID, expected)])
      #expect(m.coordinator.activeCalls.isEmpty)
      // The same push again (PushKit redelivers) is reported and ended at once.
      let late = try #require(m.plan())
      #expect(late.endAtOnce == expected)
      #expect(late.uuid != groupUUID)
      #expect(m.on(.reported(late, accepted: true)) == [.reportEnded(late.uuid, expected)])
      // The group-invite will not come (the server rings only members still rung); had it
      // been on its way, it is not reported again.
      #expect(m.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false)).isEmpty)
    }

    // Still ringing Bob: resolved, the ring goes on.
    var ringing = Machine()
    ringing.pushed()
    #expect(
      ringing.on(.groupResolved(groupId, groupState(.active, bob: .invited), userId: "bob"))
        == [.cancel(.pushResolution(groupUUID))])
    #expect(ringing.coordinator.call(groupId)?.stage == .ringing)

    // This user's id not known yet: nothing is concluded, the timer stays armed and fires.
    var unknown = Machine()
    unknown.pushed()
    #expect(unknown.on(.groupResolved(groupId, groupState(.active, bob: .invited), userId: nil)).isEmpty)
    #expect(unknown.coordinator.call(groupId)?.awaitingResolution == true)
    #expect(unknown.on(.timerFired(.pushResolution(groupUUID))) == [.reportEnded(groupUUID, .failed)])

    // A "not found" after the invite was seen does not end a call that rang here.
    var seen = Machine()
    seen.pushed()
    seen.on(.groupInvite(callId: groupId, handle: "alice", displayName: "Standup", video: false))
    #expect(seen.on(.groupResolved(groupId, nil, userId: "bob")).isEmpty)
    #expect(seen.coordinator.call(groupId) != nil)

    // Answered here before the answer came: the join stands, unless the call is over.
    var answered = Machine()
    answered.pushed()
    _ = answered.answered()
    #expect(
      answered.on(.groupResolved(groupId, groupState(.ringing, bob: .declined), userId: "bob"))
        == [.cancel(.pushResolution(groupUUID))])
    #expect(answered.coordinator.call(groupId)?.stage == .answering)
    var over = Machine()
    over.pushed()
    let pending = over.answered()
    #expect(
      over.on(.groupResolved(groupId, groupState(.ended, bob: .missed, reason: .cancelled), userId: "bob"))
        == [
          .cancel(.answer(groupUUID)), .fail(actionId: pending), .cancel(.pushResolution(groupUUID)),
          .reportEnded(groupUUID, .remoteEnded),
        ])
  }

  // Mute in the OS UI mutes the group call; hold is refused (the call goes on for the others),
  // and so is a video toggle (a group call's video is fixed when it starts).
  @Test func muteGoesToTheGroupCallAndHoldIsRefused() {
    var m = Machine()
    m.invited()
    _ = m.answered()
    let mute = action(.setMuted(true))
    #expect(m.on(.action(mute)) == [.setGroupMuted(groupId, true), .fulfill(actionId: mute.id)])
    #expect(m.coordinator.call(groupId)?.muted == true)
    let hold = action(.setHeld(true))
    #expect(m.on(.action(hold)) == [.fail(actionId: hold.id)])
    #expect(m.on(.videoToggled(groupId, enabled: true)).isEmpty)
    let dtmf = action(.playDTMF("1"))
    #expect(m.on(.action(dtmf)) == [.fail(actionId: dtmf.id)])
  }

  // LiveKit group calls: the app's media connect once the call is joined (muted if the user
  // muted meanwhile), their `.connected` fulfils the answer, and they disconnect when the call
  // is left or ends.
  @Test func liveKitMediaConnectWhenJoinedAndDisconnectWhenTheCallEnds() {
    var m = Machine()
    m.invited()
    // Credentials for a ring not answered here are not used.
    #expect(m.on(.groupLiveKit(groupId, url: "wss://lk.example", token: "t")).isEmpty)
    let answer = m.answered()
    m.on(.action(action(.setMuted(true))))
    #expect(
      m.on(.groupLiveKit(groupId, url: "wss://lk.example", token: "t"))
        == [.connectGroupMedia(groupId, url: "wss://lk.example", token: "t", video: false, muted: true)])
    #expect(m.on(.groupLiveKit(groupId, url: "wss://lk.example", token: "t2")).isEmpty)
    #expect(m.on(.groupMedia(groupId, .connected)) == [.cancel(.answer(groupUUID)), .fulfill(actionId: answer)])
    let end = action(.end)
    #expect(
      m.on(.action(end)) == [.disconnectGroupMedia(groupId), .leaveGroup(groupId), .fulfill(actionId: end.id)])

    // Ended by the server: disconnected, and reported.
    var n = Machine()
    n.invited()
    _ = n.answered()
    n.on(.groupLiveKit(groupId, url: "wss://lk.example", token: "t"))
    n.on(.groupMedia(groupId, .connected))
    #expect(
      n.on(.groupState(groupId, .ended(.ended)))
        == [.disconnectGroupMedia(groupId), .reportEnded(groupUUID, .remoteEnded)])
  }

  // This device's media failing for good ends the call (reported failed) and leaves it.
  @Test func failedGroupMediaEndTheCall() {
    var m = Machine()
    m.invited()
    let answer = m.answered()
    #expect(m.on(.groupMedia(groupId, .disconnected)).isEmpty)
    #expect(
      m.on(.groupMedia(groupId, .failed))
        == [
          .cancel(.answer(groupUUID)), .fail(actionId: answer), .reportEnded(groupUUID, .failed), .leaveGroup(groupId),
        ])
    // A ring's media cannot fail: there are none.
    var ringing = Machine()
    ringing.invited()
    #expect(ringing.on(.groupMedia(groupId, .failed)).isEmpty)
  }

  // A provider reset declines group rings and leaves joined group calls, reporting nothing;
  // signaling stopped for good reports them failed and sends nothing.
  @Test func resetAndSignalingStoppedEndGroupCalls() {
    var m = Machine()
    m.invited()
    m.on(.groupInvite(callId: "g2", handle: "carol", displayName: nil, video: false))
    m.on(
      .reported(
        IncomingCallReport(
          uuid: CallUUIDs.uuid(for: "g2"), callId: "g2", handle: "carol", displayName: nil, hasVideo: false,
          origin: .invite, isGroup: true),
        accepted: true))
    _ = m.answered()
    m.on(.groupMedia(groupId, .connected))
    #expect(m.on(.reset) == [.leaveGroup(groupId), .declineGroup("g2"), .audioDeactivated])

    var n = Machine()
    n.invited()
    #expect(n.on(.signalingStopped) == [.reportEnded(groupUUID, .failed)])
  }

  // 1:1 and group events never cross: an engine's state or a get-call answer for a group call,
  // a get-group answer or a group state for a 1:1 call, change nothing.
  @Test func oneToOneAndGroupEventsDoNotCross() {
    var m = Machine()
    m.invited()
    #expect(m.on(.engine(groupId, .ended(.remote(.hangup)))).isEmpty)
    #expect(m.on(.resolved(groupId, nil)).isEmpty)
    #expect(m.on(.invite(callId: groupId, handle: "alice", displayName: nil, video: false)).isEmpty)
    #expect(m.coordinator.call(groupId) != nil)

    var one = Machine()
    one.on(.invite(callId: "c1", handle: "alice", displayName: nil, video: false))
    #expect(one.on(.groupState("c1", .ended(.ended))).isEmpty)
    #expect(one.on(.groupResolved("c1", nil, userId: "bob")).isEmpty)
    #expect(one.on(.groupMedia("c1", .failed)).isEmpty)
    #expect(one.coordinator.call("c1") != nil)
  }
}
