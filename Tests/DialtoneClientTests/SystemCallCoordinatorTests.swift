import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

private let callId = "3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"
private let callUUID = UUID(uuidString: callId) ?? UUID()

private func pushPayload(_ id: String = callId) -> [AnyHashable: Any] {
  [
    "aps": ["content-available": 1], "dialtone": 1, "type": "incoming-call", "callId": id, "callerId": "alice",
    "callerDeviceId": "phone", "callerName": "Alice", "callerHandle": "alice", "hasVideo": true,
    "createdAt": 1_732_880_000_000,
  ]
}

private func state(
  _ phase: CallPhase, callee: String? = nil, reason: EndReason? = nil
) -> CallState {
  CallState(
    callId: callId, callerId: "alice", calleeId: "bob", callerDeviceId: "phone", calleeDeviceId: callee,
    video: false, state: phase, createdAt: 1_732_880_000_000, endReason: reason)
}

private struct Rig {
  let log = CallLog()
  let clock = ManualClientClock()
  let ui: RecordingCallUI
  let coordinator: IncomingCallCoordinator

  init(answerTimeout: Double = 10) {
    ui = RecordingCallUI(log: log)
    coordinator = IncomingCallCoordinator(
      deviceId: "bob-phone", ui: ui, signaling: RecordingSignaling(log: log), clock: clock,
      answerTimeout: answerTimeout)
  }
}

@Suite struct IncomingCallCoordinatorTests {
  // (a) The push is reported to the OS before signaling is asked to connect.
  @Test func pushIsReportedBeforeAnyNetwork() async {
    let rig = Rig()
    let uuid = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    #expect(uuid == callUUID)
    #expect(rig.log.entries == [
      .reportIncoming(callUUID, handle: "alice", name: "Alice", video: true),
      .connect(callId),
    ])
    #expect(await rig.coordinator.call(callId)?.stage == .ringing)
    #expect(await rig.coordinator.call(callId)?.pushed == true)
  }

  // (a) An FCM-style payload (string values) works the same.
  @Test func stringValuedPayloadIsAccepted() async {
    let rig = Rig()
    let payload: [AnyHashable: Any] = [
      "dialtone": "1", "type": "incoming-call", "callId": callId, "callerId": "alice", "hasVideo": "false",
      "createdAt": "1732880000000",
    ]
    _ = await rig.coordinator.handleVoIPPush(payload: payload)
    #expect(rig.log.entries == [.reportIncoming(callUUID, handle: "alice", name: nil, video: false), .connect(callId)])
  }

  // (b) A malformed push is still reported, then ended as failed; nothing else happens.
  @Test func malformedPushIsReportedThenFailed() async {
    let rig = Rig()
    let bad: [AnyHashable: Any] = ["dialtone": 1, "type": "incoming-call", "callerId": 42]
    let uuid = await rig.coordinator.handleVoIPPush(payload: bad)
    #expect(rig.log.entries == [
      .reportIncoming(uuid, handle: "Unknown", name: nil, video: false),
      .ended(uuid, .failed),
    ])
    #expect(await rig.coordinator.activeCalls.isEmpty)
    // A payload that is not JSON at all behaves the same.
    let other = await rig.coordinator.handleVoIPPush(payload: ["dialtone": Date()])
    #expect(other != uuid)
    #expect(rig.log.entries.suffix(2) == [
      .reportIncoming(other, handle: "Unknown", name: nil, video: false), .ended(other, .failed),
    ])
  }

  // (c) The get-call answer ends the OS call with the reason from protocol.md section 9.
  @Test func pushedCallResolutionFollowsTheTable() async {
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
      #expect(IncomingCallCoordinator.endReason(forPushedCall: callState, ownDeviceId: "bob-phone") == expected)
      let rig = Rig()
      _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
      await rig.coordinator.resolvePushedCall(callId: callId, state: callState)
      if let expected {
        #expect(rig.log.entries.last == .ended(callUUID, expected))
        #expect(await rig.coordinator.call(callId) == nil)
      } else {
        #expect(rig.log.entries.last == .connect(callId))
        #expect(await rig.coordinator.call(callId) != nil)
      }
    }
  }

  // (d) The answer action completes only when the call connects.
  @Test func answerIsFulfilledWhenConnected() async {
    let rig = Rig()
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    let coordinator = rig.coordinator
    let answer = Task { await coordinator.performAnswer(uuid: callUUID) }
    // The push-resolution timer and the answer timer.
    #expect(await eventually { rig.log.entries.last == .answer(callId) && rig.clock.sleeperCount == 2 })
    await rig.coordinator.incomingInvite(callId: callId, handle: "alice", displayName: "Alice", hasVideo: true)
    #expect(await rig.coordinator.call(callId)?.stage == .answering)
    await rig.coordinator.callConnected(callId: callId)
    #expect(await answer.value == true)
    #expect(await rig.coordinator.call(callId)?.stage == .connected)
    #expect(rig.clock.sleeperCount == 0)
    // The invite did not report the pushed call a second time.
    #expect(rig.log.entries.filter { if case .reportIncoming = $0 { return true } else { return false } }.count == 1)
  }

  // (d) ... and fails after the timeout (injected clock), ending the call.
  @Test func answerFailsAfterTheTimeout() async {
    let rig = Rig(answerTimeout: 10)
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    let coordinator = rig.coordinator
    let answer = Task { await coordinator.performAnswer(uuid: callUUID) }
    #expect(await eventually { rig.clock.sleeperCount == 2 })
    rig.clock.advance(by: 9.9)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await coordinator.call(callId)?.stage == .answering)
    rig.clock.advance(by: 0.1)
    #expect(await answer.value == false)
    // The answer action fails first; the end is reported to the OS and signaling right after.
    #expect(await eventually { rig.log.entries.count >= 5 })
    #expect(rig.log.entries.suffix(3) == [.answer(callId), .ended(callUUID, .failed), .end(callId, .answerTimedOut)])
    #expect(await coordinator.call(callId) == nil)
  }

  // (e) Audio starts only when the OS activates the audio session.
  @Test func audioStartsOnlyOnDidActivate() async {
    let rig = Rig()
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    let coordinator = rig.coordinator
    let answer = Task { await coordinator.performAnswer(uuid: callUUID) }
    #expect(await eventually { rig.clock.sleeperCount == 2 })
    await coordinator.callConnected(callId: callId)
    #expect(await answer.value)
    #expect(await coordinator.audioActive == false)
    #expect(!rig.log.entries.contains(.audioOn))
    await coordinator.didActivateAudioSession()
    #expect(await coordinator.audioActive)
    #expect(rig.log.entries.last == .audioOn)
    await coordinator.didDeactivateAudioSession()
    #expect(await coordinator.audioActive == false)
    #expect(rig.log.entries.last == .audioOff)
  }

  // (f) A provider reset ends every call.
  @Test func providerResetEndsEveryCall() async {
    let rig = Rig()
    let other = "call-b"
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    await rig.coordinator.incomingInvite(callId: other, handle: "carol", displayName: nil, hasVideo: false)
    let outgoing = "call-c"
    _ = await rig.coordinator.startOutgoingCall(callId: outgoing)
    let coordinator = rig.coordinator
    let answer = Task { await coordinator.performAnswer(uuid: callUUID) }
    #expect(await eventually { rig.clock.sleeperCount == 2 })
    await coordinator.didActivateAudioSession()
    await coordinator.providerDidReset()
    #expect(await answer.value == false)
    #expect(await coordinator.activeCalls.isEmpty)
    #expect(await coordinator.audioActive == false)
    let ends = rig.log.entries.filter { if case .end = $0 { return true } else { return false } }
    #expect(Set(ends.map { "\($0)" }) == Set([callId, other, outgoing].map { "\(CallLog.Entry.end($0, .providerReset))" }))
    #expect(rig.log.entries.last == .audioOff)
    #expect(rig.clock.sleeperCount == 0)
  }

  // (g) Call ids map to stable UUIDs and back.
  @Test func callIdsMapToStableUUIDs() async {
    #expect(IncomingCallCoordinator.uuid(for: callId) == callUUID)
    #expect(IncomingCallCoordinator.uuid(for: callId.uppercased()) == callUUID)
    let name = "call-7.x_y"
    let first = IncomingCallCoordinator.uuid(for: name)
    #expect(first == IncomingCallCoordinator.uuid(for: name))
    #expect(first != IncomingCallCoordinator.uuid(for: "call-8.x_y"))
    #expect(first.uuidString.dropFirst(14).first == "5")  // version 5 (name-based)
    // RFC 9562 test vector: v5 of "www.example.com" in the DNS namespace.
    let dns = UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8") ?? UUID()
    #expect(CallUUIDs.nameBased("www.example.com", namespace: dns).uuidString.lowercased()
      == "2ed6657d-e927-568b-95e1-2665a8aea6a2")
    let rig = Rig()
    let uuid = await rig.coordinator.incomingInvite(callId: name, handle: "carol", displayName: nil, hasVideo: false)
    #expect(uuid == first)
    #expect(await rig.coordinator.callId(for: first) == name)
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    #expect(await rig.coordinator.callId(for: callUUID) == callId)
  }

  // OS actions are forwarded to signaling; remote ends map to OS reasons; outgoing reports.
  @Test func actionsAndRemoteEndsAndOutgoingCalls() async {
    let rig = Rig()
    let c = rig.coordinator
    await c.incomingInvite(callId: callId, handle: "alice", displayName: "Alice", hasVideo: false)
    #expect(await c.performSetMuted(uuid: callUUID, muted: true))
    #expect(await c.performSetHeld(uuid: callUUID, held: true))
    #expect(await c.performPlayDTMF(uuid: callUUID, digits: "12#"))
    #expect(await c.performSetMuted(uuid: UUID(), muted: true) == false)
    await c.remoteEnded(callId: callId, reason: .answeredElsewhere)
    #expect(rig.log.entries.suffix(4) == [
      .muted(callId, true), .held(callId, true), .dtmf(callId, "12#"), .ended(callUUID, .answeredElsewhere),
    ])
    await c.remoteEnded(callId: callId, reason: .hangup)  // unknown now: ignored
    #expect(rig.log.entries.count == 5)

    let out = "out-1"
    let outUUID = await c.startOutgoingCall(callId: out)
    #expect(await c.performStartCall(uuid: outUUID))
    await c.outgoingCallStartedConnecting(callId: out)
    await c.callConnected(callId: out)
    #expect(await c.performEnd(uuid: outUUID))
    #expect(rig.log.entries.suffix(3) == [.outgoingConnecting(outUUID), .outgoingConnected(outUUID), .end(out, .user)])
  }

  // A push the OS refuses (Do Not Disturb, block list) does not connect.
  @Test func refusedPushDoesNotConnect() async {
    let rig = Rig()
    rig.ui.refuseIncoming = true
    _ = await rig.coordinator.handleVoIPPush(payload: pushPayload())
    #expect(rig.log.entries == [.reportIncoming(callUUID, handle: "alice", name: "Alice", video: true)])
    #expect(await rig.coordinator.activeCalls.isEmpty)
  }
}

@Suite struct PushResolutionTimeoutTests {
  // (c) "no answer / no connection": a pushed call with neither invite nor get-call answer
  // ends as failed after the push-resolution timeout.
  @Test func unresolvedPushedCallFailsAfterTimeout() async {
    let log = CallLog()
    let clock = ManualClientClock()
    let coordinator = IncomingCallCoordinator(
      deviceId: "bob-phone", ui: RecordingCallUI(log: log), signaling: RecordingSignaling(log: log), clock: clock,
      pushResolutionTimeout: 30)
    _ = await coordinator.handleVoIPPush(payload: pushPayload())
    #expect(await eventually { clock.sleeperCount == 1 })
    clock.advance(by: 29)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await coordinator.call(callId) != nil)
    clock.advance(by: 1)
    #expect(await eventually { await coordinator.call(callId) == nil })
    #expect(log.entries.last == .ended(callUUID, .failed))

    // A call whose invite arrived is resolved: the timer no longer applies.
    _ = await coordinator.handleVoIPPush(payload: pushPayload("call-2"))
    await coordinator.incomingInvite(callId: "call-2", handle: "alice", displayName: nil, hasVideo: false)
    #expect(await eventually { clock.sleeperCount == 0 })
    clock.advance(by: 60)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await coordinator.call("call-2")?.stage == .ringing)
  }
}
