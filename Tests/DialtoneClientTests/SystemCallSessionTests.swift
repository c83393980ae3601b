import DialtoneClient
import DialtoneClientLinux
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let secret = "system-call-session-test-secret-0123"

/// Plays the OS call UI (CallKit): every transaction the session requests comes back as the
/// matching action, and the test can perform the user's own actions. It remembers each
/// action's id, so tests can check how it was settled.
final class FakeOS: Sendable {
  let log = CallLog()
  let ui: RecordingCallUI
  let clock: any DialtoneClock
  private struct Actions: Sendable {
    var session: SystemCallSession?
    var ids: [String: UUID] = [:]
  }
  private let actions = Locked(Actions())

  init(clock: any DialtoneClock) {
    self.clock = clock
    ui = RecordingCallUI(log: log)
    ui.onRequest { [weak self] transaction in
      guard let self else { return nil }
      switch transaction {
      case .startCall(let uuid, _, _, _): self.perform(.startCall, uuid, name: "start")
      case .answer(let uuid): self.perform(.answer, uuid, name: "answer")
      case .end(let uuid): self.perform(.end, uuid, name: "end")
      case .setMuted(let uuid, let muted): self.perform(.setMuted(muted), uuid, name: "mute")
      case .setHeld(let uuid, let held): self.perform(.setHeld(held), uuid, name: "hold")
      }
      return nil
    }
  }

  func attach(_ session: SystemCallSession) { actions.withLock { $0.session = session } }

  /// The user (or the OS) performs an action; returns its id.
  @discardableResult
  func perform(_ kind: SystemCallAction.Kind, _ uuid: UUID, name: String, timeout: Double = 10) -> UUID {
    let action = SystemCallAction(
      id: UUID(), callUUID: uuid, kind: kind, timeoutDate: clock.now.addingTimeInterval(timeout))
    let session: SystemCallSession? = actions.withLock { actions in
      actions.ids[name] = action.id
      return actions.session
    }
    session?.perform(action, handle: RecordingActionHandle(id: action.id, log: log))
    return action.id
  }

  func id(_ name: String) -> UUID? { actions.withLock { $0.ids[name] } }
  var entries: [CallLog.Entry] { log.entries }
  func saw(_ entry: CallLog.Entry) async -> Bool { await eventually { self.log.contains(entry) } }
}

/// A phone whose app runs a SystemCallSession (fake peer connections, the fake OS).
private struct Phone {
  let session: SystemCallSession
  let os: FakeOS
  let factory: EngineFakePeerConnectionFactory
}

/// A plain CallClient on the other end.
private struct Peer {
  let client: CallClient
  let factory: EngineFakePeerConnectionFactory
  let incoming: Locked<[CallEngine]>
}

@Suite(.serialized) struct SystemCallSessionTests {
  private func signaling(_ rig: LoopbackServer, _ user: String, _ device: String) -> SignalingClient {
    var configuration = SignalingClient.Configuration(url: rig.webSocketURL)
    configuration.backoff = [.milliseconds(50)]
    return SignalingClient(configuration: configuration, transport: LWSSignalingTransport(client: rig.network)) {
      try rig.token(user, device: device)
    }
  }

  private func phone(
    _ rig: LoopbackServer, _ user: String, _ device: String = "iphone",
    clock: any DialtoneClock = SystemClock(), policy: CallEngine.Policy = .init(), iceServers: [IceServer] = [],
    permissions: (any MediaPermissions)? = nil, applicationActive: Bool = true
  ) -> Phone {
    let os = FakeOS(clock: clock)
    let factory = EngineFakePeerConnectionFactory(log: EngineLog())
    let session = SystemCallSession(
      signaling: signaling(rig, user, device), iceServers: IceServerCache(defaults: iceServers), factory: factory,
      ui: os.ui,
      media: RecordingMedia(log: os.log), deviceId: device, clock: clock, policy: policy, permissions: permissions,
      applicationActive: applicationActive)
    os.attach(session)
    session.start()
    return Phone(session: session, os: os, factory: factory)
  }

  private func peer(_ rig: LoopbackServer, _ user: String, policy: CallEngine.Policy = .init()) async -> Peer {
    let factory = EngineFakePeerConnectionFactory(log: EngineLog())
    var configuration = CallClient.Configuration()
    configuration.policy = policy
    let client = CallClient(
      signaling: signaling(rig, user, "phone"), iceServers: IceServerCache(defaults: []),
      factory: factory, configuration: configuration)
    let incoming = Locked<[CallEngine]>([])
    Task {
      for await event in client.events { if case .incoming(let e) = event { incoming.withLock { $0.append(e) } } }
    }
    await client.start()
    return Peer(client: client, factory: factory, incoming: incoming)
  }

  /// Both fake connections report connected.
  private func connect(_ a: EngineFakePeerConnectionFactory, _ b: EngineFakePeerConnectionFactory) async throws {
    try #require(await eventually { !a.connections.isEmpty && !b.connections.isEmpty })
    a.connections.last?.emitState(.connected)
    b.connections.last?.emitState(.connected)
  }

  /// Alice (a plain client) calls Bob's online phone; returns once Bob's OS shows the call.
  private func ringingCall(_ rig: LoopbackServer, clock: any DialtoneClock = SystemClock()) async throws
    -> (alice: Peer, bob: Phone, call: CallEngine, uuid: UUID)
  {
    let alice = await peer(rig, "alice")
    let bob = phone(rig, "bob", clock: clock)
    await bob.session.goOnline()
    let call = await alice.client.dial("bob")
    let uuid = CallUUIDs.uuid(for: call.callId)
    try #require(await bob.os.saw(.reportIncoming(uuid, handle: "alice", name: nil, video: false)))
    return (alice, bob, call, uuid)
  }

  private func tearDown(_ rig: LoopbackServer, _ alice: Peer, _ bob: Phone) async {
    await alice.client.stop()
    await bob.session.stop()
    await rig.stop()
  }

  // Rule 1 end to end: the push is reported before receiveVoIPPush returns, the device then
  // connects and gets the invite (not reported again), the answer action waits for media,
  // audio starts only in didActivate, the camera only after Answer.
  @Test func aPushedCallIsReportedSynchronouslyAndAnsweredThroughTheOS() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let bob = phone(rig, "bob")
    let call = await alice.client.dial("bob", video: true)
    // The server sends the push once it has the invite.
    try #require(
      await eventually {
        let reply = try? await alice.client.signaling.request(.getCall(.init(callId: call.callId)))
        if case .ack? = reply { return true } else { return false }
      })

    let payload = pushPayload(call.callId, video: true)
    #expect(bob.session.receiveVoIPPush(payload))
    // No await since: the report is already made (PushKit's delegate may return now).
    let uuid = CallUUIDs.uuid(for: call.callId)
    #expect(bob.os.entries.first == .reportIncoming(uuid, handle: "alice", name: "Alice", video: true))

    // Only then does the device go online: the server replays the invite, the caller hears ringback.
    #expect(await eventually { await call.state == .ringing })
    #expect(await eventually { await bob.session.client.engine(for: call.callId) != nil })
    #expect(bob.os.entries.filter { if case .reportIncoming = $0 { true } else { false } }.count == 1)
    #expect(!bob.os.log.contains(.cameraOn))

    let answer = bob.os.perform(.answer, uuid, name: "answer")
    #expect(await eventually { await call.state == .connecting })
    #expect(await bob.os.saw(.cameraOn))
    #expect(bob.os.log.contains(.prepareAudio(video: true)))
    #expect(!bob.os.log.contains(.fulfilled(answer)))
    try await connect(alice.factory, bob.factory)
    #expect(await bob.os.saw(.fulfilled(answer)))
    #expect(!bob.os.log.contains(.audioOn))
    bob.session.didActivateAudioSession()
    #expect(await bob.os.saw(.audioOn))

    // The in-app hang-up goes through the OS; the caller's call ends as hung up.
    bob.session.hangUp(call.callId)
    #expect(await eventually { await call.state == .ended(.remote(.hangup)) })
    #expect(await bob.os.saw(.cameraOff))
    #expect(bob.os.id("end").map { bob.os.log.contains(.fulfilled($0)) } == true)
    #expect(!bob.os.entries.contains { if case .ended = $0 { true } else { false } })

    await tearDown(rig, alice, bob)
  }

  // Pre-connect (protocol.md 11) under the CallKit rules: the leg is negotiated and connected
  // while the OS shows the call, with its media held and nothing of it shown; the answer
  // action is fulfilled as soon as the adopted leg carries the call (no negotiation on the
  // answer path), its media released only then, and audio still waits for didActivate. Bob's
  // leg is private (relay candidates only) until he answers.
  @Test func aPreconnectedCallIsAnsweredThroughTheOSWithoutNegotiating() async throws {
    var policy = CallEngine.Policy()
    policy.preconnect = true
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice", policy: policy)
    let turn = IceServer(urls: ["turn:turn.test:3478?transport=udp"], username: "1:bob", credential: "secret")
    let bob = phone(rig, "bob", policy: policy, iceServers: [turn])
    await bob.session.goOnline()
    // Pre-connect is agreed in welcome: a call dialled before it goes without.
    try #require(await eventually { await alice.client.signaling.agreedFeatures.contains(ProtocolFeature.preconnect) })
    let call = await alice.client.dial("bob")
    let uuid = CallUUIDs.uuid(for: call.callId)
    try #require(await bob.os.saw(.reportIncoming(uuid, handle: "alice", name: nil, video: false)))
    // Bob's phone asked for a leg: Alice made it (her second connection) and Bob answered it early (his second).
    try #require(await eventually { alice.factory.connections.count == 2 && bob.factory.connections.count == 2 })
    let (aliceLeg, bobLeg) = (alice.factory.connections[1], bob.factory.connections[1])
    #expect(alice.factory.configurations[1].mediaHeld && bob.factory.configurations[1].mediaHeld)
    #expect(bob.factory.configurations[1].iceTransportPolicy == .relay)
    #expect(alice.factory.configurations[1].iceTransportPolicy == .all)
    #expect(
      await eventually {
        bobLeg.calls.contains("setLocal(answer)") && aliceLeg.calls.contains("setRemote(answer:answer-pc2)")
      })
    aliceLeg.emitState(.connected)
    bobLeg.emitState(.connected)
    // Ringing on: nothing of the leg reaches the OS, no media is released.
    #expect(await call.state == .ringing)
    #expect(!bobLeg.calls.contains("releaseMedia") && !aliceLeg.calls.contains("releaseMedia"))
    #expect(bob.os.entries.count == 1)

    let answer = bob.os.perform(.answer, uuid, name: "answer")
    #expect(await bob.os.saw(.fulfilled(answer)))
    #expect(await eventually { await call.state == .connected })
    #expect(await eventually { bobLeg.calls.contains("releaseMedia") && aliceLeg.calls.contains("releaseMedia") })
    // Answered: Bob's leg may use every candidate from now on.
    #expect(await eventually { bobLeg.calls.contains("iceTransportPolicy(all)") })
    // No negotiation on the answer path: the main connections never answered or applied an answer.
    #expect(!bob.factory.connections[0].calls.contains("createAnswer"))
    #expect(!alice.factory.connections[0].calls.contains { $0.hasPrefix("setRemote(answer") })
    #expect(bob.factory.connections[0].calls.contains("close") && alice.factory.connections[0].calls.contains("close"))
    #expect(!bob.os.log.contains(.audioOn))
    bob.session.didActivateAudioSession()
    #expect(await bob.os.saw(.audioOn))

    bob.session.hangUp(call.callId)
    #expect(await eventually { await call.state == .ended(.remote(.hangup)) })
    await tearDown(rig, alice, bob)
  }

  // Delegate callbacks are handled in the order the OS made them: an answer followed at once
  // by an end accepts and then hangs up (never a decline that overtook the accept).
  @Test func osActionsAreHandledInOrder() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let (alice, bob, call, uuid) = try await ringingCall(rig)
    #expect(await eventually { await call.state == .ringing })

    let answer = bob.os.perform(.answer, uuid, name: "answer")
    let end = bob.os.perform(.end, uuid, name: "end")
    #expect(await eventually { if case .ended = await call.state { true } else { false } })
    #expect(await call.state == .ended(.remote(.hangup)))
    #expect(await bob.os.saw(.failed(answer)))
    #expect(bob.os.log.contains(.fulfilled(end)))

    await tearDown(rig, alice, bob)
  }

  // The answer's deadline is the action's timeoutDate: past it the call ends (reported as
  // failed, and over signaling), and the action is never settled.
  @Test func anAnswerThatCannotConnectByItsDeadlineEndsTheCall() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let clock = ManualClock()
    let (alice, bob, call, uuid) = try await ringingCall(rig, clock: clock)

    let answer = bob.os.perform(.answer, uuid, name: "answer", timeout: 7)
    #expect(await eventually { await call.state == .connecting })
    #expect(await eventually { clock.pendingDeadlines.contains(7) })
    clock.advance(by: 7)
    #expect(await bob.os.saw(.ended(uuid, .failed)))
    #expect(await eventually { await call.state == .ended(.remote(.hangup)) })
    // Media connecting now settles nothing.
    try await connect(alice.factory, bob.factory)
    try await Task.sleep(for: .milliseconds(50))
    #expect(!bob.os.log.contains(.fulfilled(answer)) && !bob.os.log.contains(.failed(answer)))

    await tearDown(rig, alice, bob)
  }

  // An outgoing call: the start transaction comes back as an action that dials; progress is
  // reported to the OS; a provider reset ends it over signaling and turns audio off.
  @Test func anOutgoingCallIsReportedAndAResetEndsIt() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let bob = phone(rig, "bob")
    let callId = try await bob.session.dial("alice", displayName: "Alice", video: false)
    let uuid = CallUUIDs.uuid(for: callId)
    #expect(await bob.os.saw(.request(.startCall(uuid: uuid, handle: "alice", displayName: "Alice", video: false))))
    #expect(await bob.os.saw(.outgoingConnecting(uuid)))
    #expect(await eventually { alice.incoming.current.count == 1 })
    let incoming = try #require(alice.incoming.current.first)
    await incoming.accept()
    #expect(await eventually { await bob.session.client.engine(for: callId)?.state == .connecting })
    try await connect(alice.factory, bob.factory)
    #expect(await bob.os.saw(.outgoingConnected(uuid)))
    #expect(await eventually { await bob.session.calls.first?.stage == .connected })

    bob.session.didActivateAudioSession()
    #expect(await bob.os.saw(.audioOn))
    bob.session.providerDidReset()
    #expect(await eventually { await incoming.state == .ended(.remote(.hangup)) })
    #expect(await bob.os.saw(.audioOff))
    #expect(await bob.session.calls.isEmpty)

    await tearDown(rig, alice, bob)
  }

  // Glare: the outgoing call that lost is ended on screen, and the survivor is answered
  // through the OS (an answer transaction), then connects.
  @Test func theGlareSurvivorIsAnsweredThroughTheOS() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let bob = phone(rig, "bob")
    await bob.session.goOnline()
    // Alice's call has the lower id and survives (protocol.md section 9).
    let aliceCall = await alice.client.dial("bob", callId: "0000-glare")
    let survivor = CallUUIDs.uuid(for: "0000-glare")
    #expect(await bob.os.saw(.reportIncoming(survivor, handle: "alice", name: nil, video: false)))
    // Bob dials Alice before seeing the ring... in the session, through the OS.
    let bobCall = try await bob.session.dial("alice")
    #expect(await bob.os.saw(.ended(CallUUIDs.uuid(for: bobCall), .remoteEnded)))
    #expect(await bob.os.saw(.request(.answer(uuid: survivor))))
    #expect(await eventually { await aliceCall.state == .connecting })

    await tearDown(rig, alice, bob)
  }

  // A push for a call already over here (it was cancelled while the push was on its way) is
  // reported and ended under a UUID the OS has never seen. This fake OS, like CallKit may,
  // refuses a UUID it showed before: the ended call's own UUID would be refused, with no call
  // active, which iOS punishes as a push not reported.
  @Test func aLatePushForACallAlreadyOverIsReportedUnderAFreshUUID() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let (alice, bob, call, uuid) = try await ringingCall(rig)
    await call.hangup()
    #expect(await bob.os.saw(.ended(uuid, .remoteEnded)))
    let seenBefore = bob.os.ui.everSeen
    #expect(bob.session.receiveVoIPPush(pushPayload(call.callId, video: false)))
    // Reported before receiveVoIPPush returned, under a new UUID, accepted, and ended at once.
    let late = try #require(
      bob.os.entries.compactMap { entry -> UUID? in
        if case .reportIncoming(let reported, _, _, _) = entry, reported != uuid { return reported }
        return nil
      }.first)
    #expect(!seenBefore.contains(late))
    #expect(await bob.os.saw(.ended(late, .remoteEnded)))
    #expect(await bob.session.calls.isEmpty)

    await tearDown(rig, alice, bob)
  }

  // A call the other side would not hear is not placed: the session asks for the microphone
  // when it never did (the user is placing the call: the app is in the foreground), and
  // refuses with a clear error when it is not allowed, before anything reaches the OS.
  @Test func aCallIsPlacedOnlyWhenTheMicrophoneIsAllowed() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let asked = FakeMediaPermissions(microphone: .notDetermined, answers: [.microphone: .granted])
    let bob = phone(rig, "bob", permissions: asked)
    let callId = try await bob.session.dial("alice")
    #expect(asked.asked == [.microphone])
    #expect(
      await bob.os.saw(
        .request(.startCall(uuid: CallUUIDs.uuid(for: callId), handle: "alice", displayName: nil, video: false))))
    bob.session.hangUp(callId)
    await bob.session.stop()

    let denied = FakeMediaPermissions(microphone: .denied)
    let refused = phone(rig, "bob", "ipad", permissions: denied)
    await #expect(throws: CallPermissionError.microphoneDenied) { try await refused.session.dial("alice") }
    await #expect(throws: CallPermissionError.microphoneDenied) {
      try await refused.session.startGroupCall(members: ["alice"])
    }
    await #expect(throws: CallPermissionError.microphoneDenied) { try await refused.session.joinRoom("standup") }
    #expect(denied.asked.isEmpty)  // the OS never asks twice: Settings only

    // The prompt could not be shown (not in the foreground): still undetermined, still refused.
    let unasked = FakeMediaPermissions(microphone: .notDetermined)
    let quiet = phone(rig, "bob", "watch", permissions: unasked)
    await #expect(throws: CallPermissionError.microphoneNotDetermined) { try await quiet.session.dial("alice") }
    #expect(unasked.asked == [.microphone])
    for phone in [refused, quiet] {
      #expect(phone.os.entries.isEmpty)
      await phone.session.stop()
    }
    await alice.client.stop()
    await rig.stop()
  }

  // Onboarding asks for what calls need, once: the microphone, and the camera for video.
  // Without the camera a video call is still placed, and the status says its camera is
  // unavailable; the microphone's state is in every status.
  @Test func onboardingAsksOnceAndAVideoCallWithoutTheCameraSaysSo() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let permissions = FakeMediaPermissions(
      microphone: .notDetermined, camera: .notDetermined, answers: [.microphone: .granted, .camera: .denied])
    let bob = phone(rig, "bob", permissions: permissions)
    #expect(
      await bob.session.requestMediaAccess(video: false) == MediaAccess(microphone: .granted, camera: .notDetermined))
    #expect(await bob.session.requestMediaAccess(video: true) == MediaAccess(microphone: .granted, camera: .denied))
    #expect(await bob.session.requestMediaAccess(video: true) == bob.session.mediaAccess)
    #expect(permissions.asked == [.microphone, .camera])

    let statuses = Locked<[SystemCallSession.CallStatus]>([])
    let reader = Task { for await status in bob.session.statuses { statuses.withLock { $0.append(status) } } }
    let callId = try await bob.session.dial("alice", video: true)
    #expect(
      await eventually {
        statuses.current.last.map { $0.callId == callId && $0.localVideo == .unavailable && $0.microphone == .granted }
          ?? false
      })
    reader.cancel()
    await tearDown(rig, alice, bob)
  }

  // iOS lets no background app capture: a video call answered on the lock screen shows its
  // camera paused (the caller is told the camera is off) and starts it only once the app is
  // active; it pauses again when the app goes to the background.
  // Hold both ways (protocol.md 7.17): CallKit's hold action (CXSetHeldCallAction) holds the
  // engine and the other side hears of it through the server; the other side's hold reaches
  // the app in the call's status.
  @Test func holdIsToldToTheOtherSideBothWays() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let (alice, bob, call, uuid) = try await ringingCall(rig)
    let statuses = Locked<[SystemCallSession.CallStatus]>([])
    let reader = Task { for await status in bob.session.statuses { statuses.withLock { $0.append(status) } } }
    let heldByBob = Locked<[Bool]>([])
    let watcher = Task { for await held in call.remoteHold { heldByBob.withLock { $0.append(held) } } }
    try #require(await eventually { await bob.session.client.engine(for: call.callId)?.state == .incoming })
    bob.os.perform(.answer, uuid, name: "answer")
    try #require(await eventually { await call.state == .connecting })
    try await connect(alice.factory, bob.factory)
    try #require(await eventually { statuses.current.last?.phase == .connected })

    let hold = bob.os.perform(.setHeld(true), uuid, name: "hold")
    #expect(await bob.os.saw(.fulfilled(hold)))
    #expect(await eventually { heldByBob.current == [true] })
    #expect(await call.remoteIsOnHold)
    #expect(await eventually { statuses.current.last?.isOnHold == true })
    let resume = bob.os.perform(.setHeld(false), uuid, name: "resume")
    #expect(await bob.os.saw(.fulfilled(resume)))
    #expect(await eventually { heldByBob.current == [true, false] })

    await call.setOnHold(true)
    #expect(await eventually { statuses.current.last?.isRemoteOnHold == true })
    await call.setOnHold(false)
    #expect(await eventually { statuses.current.last?.isRemoteOnHold == false })

    watcher.cancel()
    reader.cancel()
    await tearDown(rig, alice, bob)
  }

  @Test func aVideoCallAnsweredInTheBackgroundStartsItsCameraWhenTheAppIsActive() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let alice = await peer(rig, "alice")
    let bob = phone(rig, "bob", applicationActive: false)
    await bob.session.goOnline()
    let call = await alice.client.dial("bob", video: true)
    let remoteCamera = Locked<[Bool]>([])
    let watcher = Task { for await on in call.remoteCamera { remoteCamera.withLock { $0.append(on) } } }
    let statuses = Locked<[SystemCallSession.CallStatus]>([])
    let reader = Task { for await status in bob.session.statuses { statuses.withLock { $0.append(status) } } }
    let uuid = CallUUIDs.uuid(for: call.callId)
    try #require(await bob.os.saw(.reportIncoming(uuid, handle: "alice", name: nil, video: true)))
    try #require(await eventually { await bob.session.client.engine(for: call.callId)?.state == .incoming })

    let answer = bob.os.perform(.answer, uuid, name: "answer")
    #expect(await eventually { await call.state == .connecting })
    try await connect(alice.factory, bob.factory)
    #expect(await bob.os.saw(.fulfilled(answer)))
    #expect(await eventually { remoteCamera.current == [false] })
    #expect(await eventually { statuses.current.last?.localVideo == .paused })
    #expect(!bob.os.log.contains(.cameraOn))

    bob.session.applicationDidBecomeActive()
    #expect(await bob.os.saw(.cameraOn))
    #expect(await eventually { remoteCamera.current == [false, true] })
    #expect(await eventually { statuses.current.last?.localVideo == .on })

    bob.session.applicationDidEnterBackground()
    #expect(await bob.os.saw(.cameraOff))
    #expect(await eventually { remoteCamera.current == [false, true, false] })
    #expect(await eventually { statuses.current.last?.localVideo == .paused })

    watcher.cancel()
    reader.cancel()
    await tearDown(rig, alice, bob)
  }

  // Signaling stopped for good (sign-out here): calls still on screen are ended there.
  @Test func stoppingEndsTheCallsOnScreen() async throws {
    let rig = try await LoopbackServer(secret: secret)
    let (alice, bob, call, uuid) = try await ringingCall(rig)
    #expect(await eventually { await bob.session.calls.first?.shown == true })
    await bob.session.stop()
    #expect(await bob.os.saw(.ended(uuid, .failed)))
    #expect(await eventually { await call.state == .ended(.remote(.declined)) })

    await alice.client.stop()
    await rig.stop()
  }
}
