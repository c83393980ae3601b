import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let callId = "3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"
private let callUUID = UUID(uuidString: callId) ?? UUID()
private let t0 = Date(timeIntervalSince1970: 1_800_000_000)

func pushPayload(_ id: String = "3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", video: Bool = true) -> [AnyHashable: Any] {
  [
    "aps": ["content-available": 1], "dialtone": 1, "type": "incoming-call", "callId": id, "callerId": "alice",
    "callerDeviceId": "phone", "callerName": "Alice", "callerHandle": "alice", "hasVideo": video,
    "createdAt": 1_732_880_000_000,
  ]
}

private func state(_ phase: CallPhase, callee: String? = nil, reason: EndReason? = nil) -> CallState {
  CallState(
    callId: callId, callerId: "alice", calleeId: "bob", callerDeviceId: "phone", calleeDeviceId: callee,
    video: false, state: phase, createdAt: 1_732_880_000_000, endReason: reason)
}

private func action(_ kind: SystemCallAction.Kind, _ uuid: UUID = callUUID, timeout: Double = 10) -> SystemCallAction {
  SystemCallAction(id: UUID(), callUUID: uuid, kind: kind, timeoutDate: t0.addingTimeInterval(timeout))
}

/// The coordinator, driven event by event at virtual time `t0`.
private struct Machine {
  var coordinator = SystemCallCoordinator(deviceId: "bob-phone")

  @discardableResult
  mutating func on(_ event: SystemCallCoordinator.Event) -> [SystemCallCoordinator.Effect] {
    coordinator.handle(event, now: t0)
  }

  /// A VoIP push for `id`, reported and accepted by the OS.
  @discardableResult
  mutating func pushed(_ id: String = callId, video: Bool = true) -> [SystemCallCoordinator.Effect] {
    guard let report = SystemCallCoordinator.reportPlan(for: pushPayload(id, video: video), ledger: coordinator.ledger)
    else { return [] }
    return on(.reported(report, accepted: true))
  }

  /// An invite over signaling, reported and accepted by the OS.
  mutating func invited(_ id: String = callId, video: Bool = false) {
    on(.invite(callId: id, handle: "alice", displayName: "Alice", video: video))
    on(
      .reported(
        IncomingCallReport(
          uuid: CallUUIDs.uuid(for: id), callId: id, handle: "alice", displayName: "Alice", hasVideo: video,
          origin: .invite),
        accepted: true))
  }
}

@Suite struct SystemCallCoordinatorTests {
  // A call is a 1:1 or a group call, incoming or outgoing, and its stage carries what is valid
  // in it: the answer action only while answering, the push's resolution only while incoming.
  @Test func aCallIsOneOfItsCasesAtEachStep() {
    var m = Machine()
    m.pushed()
    #expect(m.coordinator.call(callId)?.progress == .incoming(.pushed, .ringing(shown: true)))
    #expect(m.coordinator.call(callId)?.kind == .oneToOne(remoteVideo: false))
    m.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: true))
    #expect(m.coordinator.call(callId)?.progress == .incoming(.invited(pushed: true), .ringing(shown: true)))
    let answer = action(.answer)
    m.on(.action(answer))
    #expect(m.coordinator.call(callId)?.progress == .incoming(.invited(pushed: true), .answering(action: answer.id)))
    m.on(.engine(callId, .connected))
    #expect(m.coordinator.call(callId)?.progress == .incoming(.invited(pushed: true), .connected))
    #expect(m.coordinator.call(callId)?.answerAction == nil)

    var out = Machine()
    out.on(.dial(callId: callId, to: "bob", displayName: nil, video: false))
    #expect(out.coordinator.call(callId)?.progress == .outgoing(.requested))
    out.on(.action(action(.startCall)))
    #expect(out.coordinator.call(callId)?.progress == .outgoing(.placing))
    out.on(.engine(callId, .calling))
    #expect(out.coordinator.call(callId)?.progress == .outgoing(.connecting))
    out.on(.engine(callId, .connected))
    #expect(out.coordinator.call(callId)?.progress == .outgoing(.connected))

    var group = Machine()
    group.on(.startGroup(callId: callId, members: ["bob"], title: nil, video: false))
    #expect(group.coordinator.call(callId)?.group?.start == .create(members: ["bob"], title: nil))
    #expect(group.coordinator.call(callId)?.remoteVideo == false)
  }

  // Rule 1: what a push reports is decided synchronously, from the payload alone.
  @Test func aPushIsPlannedFromThePayloadAlone() {
    let ledger = SystemCallCoordinator.PushLedger()
    let report = SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: ledger)
    #expect(
      report
        == IncomingCallReport(
          uuid: callUUID, callId: callId, handle: "alice", displayName: "Alice", hasVideo: true, origin: .push))
    // An FCM-style payload (string values) works the same.
    let strings: [AnyHashable: Any] = [
      "dialtone": "1", "type": "incoming-call", "callId": callId, "callerId": "alice", "hasVideo": "false",
      "createdAt": "1732880000000",
    ]
    #expect(SystemCallCoordinator.reportPlan(for: strings, ledger: ledger)?.hasVideo == false)
  }

  // Rule 1: a malformed push is still reported (random UUID, "Unknown") and ended as failed.
  @Test func aMalformedPushIsReportedAndEndedAtOnce() throws {
    let ledger = SystemCallCoordinator.PushLedger()
    let bad: [AnyHashable: Any] = ["dialtone": 1, "type": "incoming-call", "callerId": 42]
    let report = try #require(SystemCallCoordinator.reportPlan(for: bad, ledger: ledger))
    #expect(report.handle == "Unknown" && report.callId == nil && report.endAtOnce == .failed)
    let other = try #require(SystemCallCoordinator.reportPlan(for: ["dialtone": Date()], ledger: ledger))
    #expect(other.uuid != report.uuid)
    var m = Machine()
    #expect(m.on(.reported(report, accepted: true)) == [.reportEnded(report.uuid, .failed)])
    #expect(m.coordinator.activeCalls.isEmpty)
    // iOS 26.4: a push the OS says need not be reported is not, when there is no call to show.
    #expect(SystemCallCoordinator.reportPlan(for: bad, ledger: ledger, mustReport: false) == nil)
    #expect(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: ledger, mustReport: false) != nil)
  }

  // Rule 1: a late push for a call already over on this device is reported and ended at once.
  @Test func aLatePushForAnEndedCallEndsAtOnce() throws {
    var m = Machine()
    m.invited()
    m.on(.engine(callId, .ended(.remote(.cancelled))))
    let report = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
    #expect(report.endAtOnce == .remoteEnded)
    #expect(report.uuid != callUUID)
    #expect(m.on(.reported(report, accepted: true)) == [.reportEnded(report.uuid, .remoteEnded)])
    #expect(
      SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger, mustReport: false) == nil)
    // The call ends between the plan and the OS's answer: taken off the screen again.
    var n = Machine()
    let plan = try #require(SystemCallCoordinator.reportPlan(for: pushPayload("call-x"), ledger: n.coordinator.ledger))
    n.invited("call-x")
    n.on(.engine("call-x", .ended(.remote(.answeredElsewhere))))
    #expect(n.on(.reported(plan, accepted: true)) == [.reportEnded(CallUUIDs.uuid(for: "call-x"), .answeredElsewhere)])
  }

  // A push for a call already over here (PushKit redelivers it, or it was late) is reported and
  // ended under a UUID CallKit has never seen: CallKit may refuse the ended call's own UUID, and
  // a refused report with no call of that UUID active counts as a push not reported (the app is
  // killed). Each such push gets a UUID of its own; nothing connects, nothing is remembered.
  @Test func aPushForACallAlreadyOverIsReportedUnderAUUIDCallKitNeverSaw() throws {
    var m = Machine()
    var shown: Set<UUID> = []
    let first = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
    shown.insert(first.uuid)
    m.on(.reported(first, accepted: true))
    // Neither invite nor get-call answer came: at the push-resolution deadline (virtual time) the
    // call ends as failed.
    let deadline = t0.addingTimeInterval(30)
    #expect(
      m.coordinator.handle(.timerFired(.pushResolution(callUUID)), now: deadline) == [
        .reportEnded(callUUID, .failed)
      ])
    #expect(m.coordinator.ledger.ended[callId] == .failed)
    for _ in 0..<2 {
      let late = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
      #expect(late.callId == callId && late.endAtOnce == .failed)
      #expect(!shown.contains(late.uuid))
      shown.insert(late.uuid)
      #expect(
        m.coordinator.handle(.reported(late, accepted: true), now: deadline) == [.reportEnded(late.uuid, .failed)])
      #expect(m.coordinator.activeCalls.isEmpty)
    }
    // Refused all the same (the OS is out of calls): nothing more to do.
    let refused = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
    #expect(!shown.contains(refused.uuid))
    #expect(
      m.coordinator.handle(.reported(refused, accepted: false), now: deadline) == [.reportEnded(refused.uuid, .failed)])
  }

  // Before the first unlock after a reboot a push may launch the app while nothing it needs can
  // be read: the push is reported (who called, under a UUID of its own) and ended at once.
  @Test func aPushTheAppCannotTakeIsReportedAndEndedAtOnce() throws {
    let report = SystemCallCoordinator.reportPlanWhileLocked(for: pushPayload())
    #expect(report.uuid != callUUID && report.callId == callId)
    #expect(report.handle == "alice" && report.displayName == "Alice" && report.hasVideo)
    #expect(report.endAtOnce == .failed)
    #expect(SystemCallCoordinator.reportPlanWhileLocked(for: pushPayload()).uuid != report.uuid)
    let malformed = SystemCallCoordinator.reportPlanWhileLocked(for: ["dialtone": 1])
    #expect(malformed.handle == "Unknown" && malformed.endAtOnce == .failed)
    var m = Machine()
    #expect(m.on(.reported(report, accepted: true)) == [.reportEnded(report.uuid, .failed)])
    #expect(m.coordinator.activeCalls.isEmpty)
  }

  // iOS lets no background app capture: a video call answered on the lock screen waits with its
  // camera paused (the peer is told), the camera starts once the app is active and pauses again
  // in the background; nothing runs to stop while the app is away.
  @Test func theCameraCapturesOnlyWhileTheAppIsActive() {
    var m = Machine(coordinator: SystemCallCoordinator(deviceId: "bob-phone", applicationActive: false))
    m.pushed(video: true)
    let answer = action(.answer)
    #expect(
      m.on(.action(answer)) == [
        .prepareAudio(video: true), .answer(callId), .cameraPaused(callId, true),
        .arm(.answer(callUUID), at: t0.addingTimeInterval(10)),
      ])
    #expect(m.coordinator.call(callId)?.cameraOn == true)
    #expect(m.on(.applicationActive(true)) == [.startCamera, .cameraPaused(callId, false)])
    #expect(m.on(.applicationActive(true)).isEmpty)
    #expect(m.on(.applicationActive(false)) == [.stopCamera, .cameraPaused(callId, true)])
    // Turned off in the background: no camera runs, none to stop; nothing resumes later.
    #expect(
      m.on(.videoToggled(callId, enabled: false)) == [
        .setVideo(callId, false), .reportUpdated(callUUID, hasVideo: false),
      ])
    #expect(m.on(.applicationActive(true)).isEmpty)
    // Back on while active: it starts at once.
    #expect(m.on(.videoToggled(callId, enabled: true)).contains(.startCamera))
    #expect(m.on(.applicationActive(false)) == [.stopCamera, .cameraPaused(callId, true)])
    // Ended in the background: nothing runs to stop.
    #expect(!m.on(.engine(callId, .ended(.remote(.hangup)))).contains(.stopCamera))
    #expect(m.on(.applicationActive(true)).isEmpty)

    // An audio call has no camera to wait for.
    var audio = Machine(coordinator: SystemCallCoordinator(deviceId: "bob-phone", applicationActive: false))
    audio.pushed(video: false)
    #expect(!audio.on(.action(action(.answer))).contains { if case .cameraPaused = $0 { true } else { false } })
    #expect(audio.on(.applicationActive(true)).isEmpty)
  }

  // Only the report's answer connects signaling, and arms the push-resolution timer.
  @Test func theReportsAnswerConnectsSignaling() throws {
    var m = Machine()
    #expect(m.pushed() == [.arm(.pushResolution(callUUID), at: t0.addingTimeInterval(30)), .connect(callId)])
    #expect(m.coordinator.call(callId)?.stage == .ringing)
    #expect(m.coordinator.call(callId)?.pushed == true)
    // A repeated push (the OS answers "duplicate") changes nothing.
    let again = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
    #expect(m.on(.reported(again, accepted: false)).isEmpty)
    // The invite of a pushed call is not reported a second time.
    #expect(
      m.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: true))
        == [.cancel(.pushResolution(callUUID))])
    // A push the OS refuses (Do Not Disturb, block list) does not connect.
    var refused = Machine()
    let plan = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: refused.coordinator.ledger))
    #expect(refused.on(.reported(plan, accepted: false)).isEmpty)
    #expect(refused.coordinator.activeCalls.isEmpty)
  }

  // Protocol.md section 9: the get-call answer ends the pushed call with the matching reason.
  @Test func pushedCallResolutionFollowsTheTable() {
    let cases: [(CallState?, SystemCallEndReason?)] = [
      (state(.accepted, callee: "bob-tablet"), .answeredElsewhere),
      (state(.ended, callee: "bob-tablet", reason: .hangup), .answeredElsewhere),
      (state(.ended, reason: .declined), .declinedElsewhere),
      (state(.ended, reason: .busy), .declinedElsewhere),
      (state(.ended, reason: .missed), .unanswered),
      (state(.ended, reason: .cancelled), .remoteEnded),
      (state(.ended, reason: .connectionLost), .remoteEnded),
      (state(.ended, reason: .glare), .remoteEnded),
      (nil, .failed),
      (state(.ringing), nil),
      (state(.accepted, callee: "bob-phone"), nil),
    ]
    for (callState, expected) in cases {
      #expect(SystemCallCoordinator.endReason(forPushedCall: callState, ownDeviceId: "bob-phone") == expected)
      var m = Machine()
      m.pushed()
      let effects = m.on(.resolved(callId, callState))
      if let expected {
        #expect(effects == [.cancel(.pushResolution(callUUID)), .reportEnded(callUUID, expected)])
        #expect(m.coordinator.call(callId) == nil)
      } else {
        #expect(effects == [.cancel(.pushResolution(callUUID))])
        #expect(m.coordinator.call(callId) != nil)
      }
    }
    // A stale "not found" does not end a call whose invite arrived.
    var m = Machine()
    m.pushed()
    m.on(.invite(callId: callId, handle: "alice", displayName: nil, video: false))
    #expect(m.on(.resolved(callId, nil)).isEmpty)
  }

  // The push-resolution timer ends an unresolved pushed call as failed.
  @Test func anUnresolvedPushedCallFailsWhenItsTimerFires() {
    var m = Machine()
    m.pushed()
    #expect(m.on(.timerFired(.pushResolution(callUUID))) == [.reportEnded(callUUID, .failed)])
    // Once the invite arrived, the timer no longer applies.
    var n = Machine()
    n.pushed()
    n.on(.invite(callId: callId, handle: "alice", displayName: nil, video: false))
    #expect(n.on(.timerFired(.pushResolution(callUUID))).isEmpty)
    #expect(n.coordinator.call(callId)?.stage == .ringing)
  }

  // Rule 5: the answer action is held until the call connects; the camera starts on Answer.
  @Test func theAnswerActionIsFulfilledWhenTheCallConnects() {
    var m = Machine()
    m.pushed(video: true)
    let answer = action(.answer, timeout: 8)
    #expect(
      m.on(.action(answer)) == [
        .prepareAudio(video: true), .answer(callId), .startCamera,
        .arm(.answer(callUUID), at: t0.addingTimeInterval(8)),
      ])
    #expect(m.coordinator.call(callId)?.stage == .answering)
    m.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: true))
    #expect(m.on(.engine(callId, .connecting)).isEmpty)
    #expect(
      m.on(.engine(callId, .connected)) == [
        .cancel(.answer(callUUID)), .fulfill(actionId: answer.id),
      ])
    #expect(m.coordinator.call(callId)?.stage == .connected)
    // A second answer for a connected call is fulfilled; ending stops the camera.
    let again = action(.answer)
    #expect(m.on(.action(again)) == [.fulfill(actionId: again.id)])
    let end = action(.end)
    #expect(m.on(.action(end)) == [.stopCamera, .end(callId, .user), .fulfill(actionId: end.id)])
  }

  // The answer's deadline is the OS's timeoutDate; a timed-out action is never settled.
  @Test func anAnswerPastItsDeadlineEndsTheCallWithoutSettlingTheAction() {
    for event in [SystemCallCoordinator.Event.timerFired(.answer(callUUID)), nil] {
      var m = Machine()
      m.invited()
      let answer = action(.answer)
      m.on(.action(answer))
      let effects = m.on(event ?? .actionTimedOut(actionId: answer.id))
      #expect(effects == [.cancel(.answer(callUUID)), .reportEnded(callUUID, .failed), .end(callId, .answerTimedOut)])
      #expect(!effects.contains(.fail(actionId: answer.id)) && !effects.contains(.fulfill(actionId: answer.id)))
      #expect(m.coordinator.call(callId) == nil)
      // Connecting afterwards settles nothing.
      #expect(m.on(.engine(callId, .connected)).isEmpty)
    }
  }

  // Rule 5: audio starts only when the OS activates the audio session.
  @Test func audioFollowsTheOSActivation() {
    var m = Machine()
    m.invited()
    m.on(.action(action(.answer)))
    let connected = m.on(.engine(callId, .connected))
    #expect(!connected.contains(.audioActivated))
    #expect(m.on(.audioActivated) == [.audioActivated])
    #expect(m.on(.audioActivated).isEmpty)
    #expect(m.on(.audioDeactivated) == [.audioDeactivated])
    #expect(m.on(.audioDeactivated).isEmpty)
  }

  // A reset ends every call over signaling, fails pending answers and turns audio off, even
  // when the OS never deactivated the session.
  @Test func aProviderResetEndsEveryCallAndDisablesAudio() {
    var m = Machine()
    m.pushed()
    m.invited("call-b")
    m.on(.dial(callId: "call-c", to: "carol", displayName: nil, video: false))
    let answer = action(.answer)
    m.on(.action(answer))
    let effects = m.on(.reset)
    #expect(effects.contains(.fail(actionId: answer.id)))
    #expect(
      Set(effects.compactMap { if case .end(let id, .providerReset) = $0 { return id } else { return nil } })
        == [callId, "call-b", "call-c"])
    #expect(!effects.contains { if case .reportEnded = $0 { return true } else { return false } })
    #expect(effects.last == .audioDeactivated)
    #expect(m.coordinator.activeCalls.isEmpty)
    var idle = Machine()
    #expect(idle.on(.reset) == [.audioDeactivated])
  }

  // An invite is reported; a refused report declines the call; a call ending before the OS
  // answered is taken off the screen.
  @Test func invitesAreReportedAndRefusalsDecline() {
    var m = Machine()
    let report = IncomingCallReport(
      uuid: callUUID, callId: callId, handle: "alice", displayName: "Alice", hasVideo: false, origin: .invite)
    #expect(
      m.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: false))
        == [.reportIncoming(report)])
    // No camera, no audio change while it rings.
    #expect(m.on(.engine(callId, .incoming)).isEmpty)
    #expect(m.on(.reported(report, accepted: false)) == [.end(callId, .systemRejected)])
    #expect(m.coordinator.activeCalls.isEmpty)
  }

  // An invite and a push for the same call at once: whichever report the OS accepts shows it,
  // and the other one's "duplicate" refusal declines nothing.
  @Test func anInviteAndAPushForTheSameCallDoNotDeclineEachOther() throws {
    var m = Machine()
    let invite = IncomingCallReport(
      uuid: callUUID, callId: callId, handle: "alice", displayName: "Alice", hasVideo: false, origin: .invite)
    _ = m.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: false))
    let push = try #require(SystemCallCoordinator.reportPlan(for: pushPayload(), ledger: m.coordinator.ledger))
    #expect(m.on(.reported(push, accepted: true)).isEmpty)
    #expect(m.on(.reported(invite, accepted: false)).isEmpty)
    #expect(m.coordinator.call(callId)?.shown == true)
    // The other order: the invite's report wins, the push's is the duplicate.
    var n = Machine()
    _ = n.on(.invite(callId: callId, handle: "alice", displayName: "Alice", video: false))
    #expect(n.on(.reported(push, accepted: false)).isEmpty)
    #expect(n.on(.reported(invite, accepted: true)).isEmpty)
    #expect(n.coordinator.call(callId)?.shown == true)
  }

  // Engine endings the OS did not ask for are reported with the matching reason.
  @Test func engineEndingsAreReported() {
    let incoming: [(CallEngine.Ending, SystemCallEndReason)] = [
      (.remote(.answeredElsewhere), .answeredElsewhere), (.remote(.declinedElsewhere), .declinedElsewhere),
      (.remote(.missed), .unanswered), (.remote(.cancelled), .remoteEnded), (.remote(.hangup), .remoteEnded),
      (.iceFailed, .failed), (.error("x"), .failed), (.local, .failed),
    ]
    for (ending, reason) in incoming {
      var m = Machine()
      m.invited()
      #expect(m.on(.engine(callId, .ended(ending))) == [.reportEnded(callUUID, reason)])
      #expect(m.on(.engine(callId, .ended(ending))).isEmpty)
    }
    let outgoing: [(CallEngine.Ending, SystemCallEndReason)] = [
      (.remote(.missed), .unanswered), (.remote(.declined), .remoteEnded), (.remote(.busy), .remoteEnded),
      (.remote(.connectionLost), .failed), (.glare(replacedBy: "x"), .remoteEnded), (.local, .failed),
    ]
    for (ending, reason) in outgoing {
      var m = Machine()
      m.on(.dial(callId: callId, to: "alice", displayName: nil, video: false))
      m.on(.action(action(.startCall)))
      #expect(m.on(.engine(callId, .ended(ending))) == [.reportEnded(callUUID, reason)])
    }
  }

  // Signaling stopped for good: every call on screen ends as failed, pending answers fail.
  @Test func signalingStoppedEndsEveryShownCall() {
    var m = Machine()
    m.pushed()
    m.invited("call-b")
    let answer = action(.answer)
    m.on(.action(answer))
    let effects = m.on(.signalingStopped)
    #expect(effects.contains(.reportEnded(callUUID, .failed)))
    #expect(effects.contains(.reportEnded(CallUUIDs.uuid(for: "call-b"), .failed)))
    #expect(effects.contains(.fail(actionId: answer.id)))
    #expect(m.coordinator.activeCalls.isEmpty)
  }

  // Outgoing: the start action dials; the engine's progress is reported; a local end is not.
  @Test func anOutgoingCallGoesThroughTheOS() {
    var m = Machine()
    #expect(
      m.on(.dial(callId: callId, to: "alice", displayName: "Alice", video: true))
        == [.request(.startCall(uuid: callUUID, handle: "alice", displayName: "Alice", video: true))])
    let start = action(.startCall)
    #expect(
      m.on(.action(start)) == [
        .prepareAudio(video: true), .dial(callId, to: "alice", video: true), .startCamera, .fulfill(actionId: start.id),
      ])
    #expect(m.on(.engine(callId, .calling)) == [.reportOutgoingStartedConnecting(callUUID)])
    #expect(m.on(.engine(callId, .ringing)).isEmpty)
    #expect(m.on(.engine(callId, .connected)) == [.reportOutgoingConnected(callUUID)])
    let end = action(.end)
    #expect(m.on(.action(end)) == [.stopCamera, .end(callId, .user), .fulfill(actionId: end.id)])
    #expect(m.on(.engine(callId, .ended(.local))).isEmpty)
    // A start the OS refused leaves nothing behind.
    var n = Machine()
    n.on(.dial(callId: "out-2", to: "carol", displayName: nil, video: false))
    let uuid = CallUUIDs.uuid(for: "out-2")
    #expect(n.on(.transactionFailed(.startCall(uuid: uuid, handle: "carol", displayName: nil, video: false))).isEmpty)
    #expect(n.coordinator.activeCalls.isEmpty)
  }

  // Glare: the survivor is answered through the OS once the OS shows it.
  @Test func theGlareSurvivorIsAnsweredThroughTheOS() {
    var m = Machine()
    m.on(.dial(callId: "glare-b", to: "alice", displayName: nil, video: false))
    m.on(.action(action(.startCall, CallUUIDs.uuid(for: "glare-b"))))
    #expect(m.on(.glare(replaced: "glare-b", survivor: "glare-a")).isEmpty)
    #expect(
      m.on(.engine("glare-b", .ended(.glare(replacedBy: "glare-a"))))
        == [.reportEnded(CallUUIDs.uuid(for: "glare-b"), .remoteEnded)])
    let uuid = CallUUIDs.uuid(for: "glare-a")
    m.on(.invite(callId: "glare-a", handle: "alice", displayName: nil, video: false))
    let report = IncomingCallReport(
      uuid: uuid, callId: "glare-a", handle: "alice", displayName: nil, hasVideo: false, origin: .invite)
    #expect(m.on(.reported(report, accepted: true)) == [.request(.answer(uuid: uuid))])
    // A survivor already on screen is answered at once.
    var n = Machine()
    n.invited("glare-a")
    #expect(n.on(.glare(replaced: "glare-b", survivor: "glare-a")) == [.request(.answer(uuid: uuid))])
  }

  // The other OS actions: forwarded for known calls, failed for unknown ones; DTMF is not
  // offered; the camera follows the toggle only once the call is answered.
  @Test func otherActionsAndTheCameraToggle() {
    var m = Machine()
    m.invited(video: false)
    let mute = action(.setMuted(true))
    let hold = action(.setHeld(true))
    let dtmf = action(.playDTMF("12#"))
    let stranger = action(.setMuted(true), UUID())
    let goneEnd = action(.end, UUID())
    #expect(m.on(.action(mute)) == [.setMuted(callId, true), .fulfill(actionId: mute.id)])
    #expect(m.on(.action(hold)) == [.setHeld(callId, true), .fulfill(actionId: hold.id)])
    #expect(m.on(.action(dtmf)) == [.fail(actionId: dtmf.id)])
    #expect(m.on(.action(stranger)) == [.fail(actionId: stranger.id)])
    #expect(m.on(.action(goneEnd)) == [.fulfill(actionId: goneEnd.id)])
    // Ringing: the toggle is recorded, the camera stays off.
    #expect(
      m.on(.videoToggled(callId, enabled: true)) == [.setVideo(callId, true), .reportUpdated(callUUID, hasVideo: true)])
    #expect(m.on(.action(action(.answer))).contains(.startCamera))
    #expect(
      m.on(.videoToggled(callId, enabled: false))
        == [.setVideo(callId, false), .reportUpdated(callUUID, hasVideo: false), .stopCamera])
  }

  // An audio call upgraded to video (by either side): the OS shows a video call and the audio
  // session moves to `.videoChat`; it shows audio again once neither side sends video.
  @Test func anUpgradeToVideoReachesTheSystemCallUI() {
    var m = Machine()
    m.invited(video: false)
    _ = m.on(.action(action(.answer)))
    #expect(
      m.on(.remoteVideo(callId, sends: true))
        == [.reportUpdated(callUUID, hasVideo: true), .prepareAudio(video: true)])
    #expect(m.on(.remoteVideo(callId, sends: true)).isEmpty)  // no change
    #expect(
      m.on(.videoToggled(callId, enabled: true))
        == [.setVideo(callId, true), .reportUpdated(callUUID, hasVideo: true), .startCamera])
    #expect(
      m.on(.videoToggled(callId, enabled: false))
        == [.setVideo(callId, false), .reportUpdated(callUUID, hasVideo: true), .stopCamera])
    #expect(m.on(.remoteVideo(callId, sends: false)) == [.reportUpdated(callUUID, hasVideo: false)])
    // Our own upgrade of an audio call.
    #expect(
      m.on(.videoToggled(callId, enabled: true)) == [
        .setVideo(callId, true), .reportUpdated(callUUID, hasVideo: true), .prepareAudio(video: true), .startCamera,
      ])
    #expect(m.on(.remoteVideo("unknown", sends: true)).isEmpty)
  }

  // The ledger of ended calls is bounded.
  @Test func theLedgerRemembersOnlyTheLastEndedCalls() {
    var m = Machine()
    for i in 0..<(SystemCallCoordinator.endedMemory + 10) {
      m.invited("call-\(i)")
      m.on(.engine("call-\(i)", .ended(.remote(.cancelled))))
    }
    #expect(m.coordinator.ledger.ended.count == SystemCallCoordinator.endedMemory)
    #expect(m.coordinator.ledger.ended["call-0"] == nil)
    #expect(m.coordinator.ledger.ended["call-\(SystemCallCoordinator.endedMemory + 9)"] == .remoteEnded)
  }

  // Call ids map to stable UUIDs.
  @Test func callIdsMapToStableUUIDs() {
    #expect(CallUUIDs.uuid(for: callId) == callUUID)
    #expect(CallUUIDs.uuid(for: callId.uppercased()) == callUUID)
    let name = "call-7.x_y"
    let first = CallUUIDs.uuid(for: name)
    #expect(first == CallUUIDs.uuid(for: name))
    #expect(first != CallUUIDs.uuid(for: "call-8.x_y"))
    #expect(first.uuidString.dropFirst(14).first == "5")  // version 5 (name-based)
    // RFC 9562 test vector: v5 of "www.example.com" in the DNS namespace.
    let dns = UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8") ?? UUID()
    #expect(
      CallUUIDs.nameBased("www.example.com", namespace: dns).uuidString.lowercased()
        == "2ed6657d-e927-568b-95e1-2665a8aea6a2")
  }

  // A network switch is a change after the first update, to a satisfied path.
  @Test func networkPathWatchIgnoresTheFirstUpdate() {
    var watch = NetworkPathWatch()
    #expect(watch.update(interfaces: ["en0"]) == false)
    #expect(watch.update(interfaces: ["en0"]) == false)
    #expect(watch.update(interfaces: []) == false)
    #expect(watch.update(interfaces: ["pdp_ip0"]) == true)
    #expect(watch.update(interfaces: ["en0", "pdp_ip0"]) == true)
  }
}
