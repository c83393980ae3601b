import DialtoneCallKit
import DialtoneClient
import DialtoneProtocol
import DialtoneURLSession
import DialtoneWebRTC
import Foundation
import Network
@preconcurrency import WebRTC

/// What the UI shows about the current call.
struct CallSnapshot: Sendable, Equatable {
  var callId: CallID
  var uuid: UUID
  var remote: String
  var status: String
  var isMuted = false
  var isVideoEnabled: Bool
  var ended = false
}

/// The example's glue between the SDK pieces. It holds no call rules: CallEngine negotiates
/// media, IncomingCallCoordinator applies the CallKit/PushKit rules, and this actor only
/// routes messages between them (the `CallSignalingActions` the coordinator asks for).
actor CallService: CallSignalingActions {
  let signaling: SignalingClient
  let ui: CallKitSystemCallUI
  let factory = WebRTCPeerConnectionFactory.shared
  let iceCache: IceServerCache
  nonisolated let snapshots: AsyncStream<CallSnapshot?>
  nonisolated let remoteVideo: AsyncStream<RTCVideoTrack?>
  private let snapshotSink: AsyncStream<CallSnapshot?>.Continuation
  private let remoteVideoSink: AsyncStream<RTCVideoTrack?>.Continuation
  private let coordinatorRef = CoordinatorRef()

  private var engines: [CallID: CallEngine] = [:]
  private var snapshot: CallSnapshot?
  /// Pushed calls whose `get-call` answer is still owed to the coordinator.
  private var awaitingGetCall: Set<CallID> = []
  /// Answered in CallKit before their invite arrived (woken by a push): accept on invite.
  private var answerOnInvite: Set<CallID> = []
  /// Glare survivors: incoming calls to answer at once in place of our outgoing call.
  private var glareSurvivors: Set<CallID> = []
  private var welcomed = false
  private var pathMonitor: NWPathMonitor?
  private var cameras: [ObjectIdentifier: CameraCapture] = [:]

  init(ui: CallKitSystemCallUI, token: @escaping @Sendable () async throws -> String, api: DialtoneAPIClient) {
    self.ui = ui
    signaling = SignalingClient(
      configuration: .init(url: ExampleConfig.signalingURL), transport: URLSessionSignalingTransport(), token: token)
    iceCache = IceServerCache(defaults: ExampleConfig.defaultIceServers, fetcher: { try await api.iceServers() })
    (snapshots, snapshotSink) = AsyncStream<CallSnapshot?>.makeStream(bufferingPolicy: .bufferingNewest(1))
    (remoteVideo, remoteVideoSink) = AsyncStream<RTCVideoTrack?>.makeStream(bufferingPolicy: .bufferingNewest(1))
  }

  /// The coordinator is made with this service as its `signaling`, then bound here.
  nonisolated func bind(_ coordinator: IncomingCallCoordinator) { coordinatorRef.set(coordinator) }
  private var coordinator: IncomingCallCoordinator { coordinatorRef.get() }

  /// At launch (also when launched by a push): listen to signaling events, network changes
  /// and new peer connections. No network here: a launch by a VoIP push must report the call
  /// to CallKit before anything touches the network (rule 1), so going online waits for
  /// `goOnline()` (app in the foreground) or `connectForPushedCall` (after the report).
  func start() async {
    Task { await self.runSignalingEvents() }
    Task { await self.runPeerConnections() }
    let monitor = NWPathMonitor()
    let seen = PathSeen()
    monitor.pathUpdateHandler = { [signaling] path in
      // The first update is the current path, not a change (the handler runs on one serial
      // queue, so `seen` needs no lock).
      let key = path.status == .satisfied ? path.availableInterfaces.map(\.name) : []
      guard seen.changed(to: key), !key.isEmpty else { return }
      // Wi-Fi ↔ cellular: the socket is probably dead; reconnect now. The media side
      // recovers by itself: CallEngine restarts ICE when the connection goes
      // disconnected/failed (rule 3), and the CallKit call stays up meanwhile.
      Task { await signaling.networkChanged() }
    }
    monitor.start(queue: DispatchQueue(label: "dialtone.path"))
    pathMonitor = monitor
  }

  /// Pre-warms ICE servers (rule 4) and connects signaling; idempotent.
  func goOnline() async {
    await iceCache.prewarm()
    await signaling.start()
  }

  // MARK: Outgoing calls (from the UI)

  func call(_ contact: Contact, video: Bool) async {
    guard engines.isEmpty else { return }
    await goOnline()
    let callId = CallIDRules.generate()
    let uuid = await coordinator.startOutgoingCall(callId: callId)
    let engine = CallEngine(
      outgoingCallId: callId, to: contact.userId, video: video, iceServers: await iceCache.current(),
      factory: factory, signaling: SignalingBridge(client: signaling))
    engines[callId] = engine
    publish(CallSnapshot(callId: callId, uuid: uuid, remote: contact.name, status: "Calling…", isVideoEnabled: video))
    observe(engine, uuid: uuid)
    #if os(iOS)
    CallAudioSession.shared.prepare(video: video)
    #endif
    do {
      // CallKit → CXStartCallAction → coordinator.performStartCall → fulfilled.
      try await ui.requestStartCall(uuid: uuid, handle: contact.userId, displayName: contact.name, video: video)
    } catch {
      engines[callId] = nil
      await coordinator.remoteEnded(callId: callId, reason: .failed)
      publish(nil)
      return
    }
    await engine.start()
  }

  // MARK: In-call controls (from the UI; they go through CallKit so its UI stays in sync)

  func toggleMute() async {
    guard let s = snapshot else { return }
    try? await ui.requestSetMuted(uuid: s.uuid, muted: !s.isMuted)
  }

  func toggleVideo() async {
    guard var s = snapshot, let engine = engines[s.callId] else { return }
    s.isVideoEnabled.toggle()
    await engine.setVideoEnabled(s.isVideoEnabled)
    ui.reportVideo(uuid: s.uuid, hasVideo: s.isVideoEnabled)
    publish(s)
  }

  func hangUp() async {
    guard let s = snapshot else { return }
    try? await ui.requestEndCall(uuid: s.uuid)
  }

  // MARK: CallSignalingActions (asked by the coordinator; each returns promptly)

  func connectForPushedCall(_ callId: CallID) async {
    awaitingGetCall.insert(callId)
    await goOnline()
    if welcomed { sendGetCall(callId) }
  }

  func answer(_ callId: CallID) async {
    if let engine = engines[callId] {
      update(callId) { $0.status = "Connecting…" }
      Task { await engine.accept() }
    } else {
      // Woken by a push and answered before the invite arrived (the server buffers it).
      answerOnInvite.insert(callId)
    }
  }

  func end(_ callId: CallID, cause: LocalEndCause) async {
    answerOnInvite.remove(callId)
    awaitingGetCall.remove(callId)
    if let engine = engines.removeValue(forKey: callId) {
      Task { await engine.hangup() }  // cancel / decline / hangup, as its state says
    } else {
      // A pushed call declined before its invite: decline it over signaling.
      let client = signaling
      Task { _ = try? await client.request { CallSignalingRequest.decline(callId: callId).clientMessage(id: $0) } }
    }
    if snapshot?.callId == callId { publish(nil) }
  }

  func setMuted(_ callId: CallID, muted: Bool) async {
    await engines[callId]?.setMuted(muted)
    update(callId) { $0.isMuted = muted }
  }

  func setHeld(_ callId: CallID, held: Bool) async {
    await engines[callId]?.setOnHold(held)
    update(callId) { $0.status = held ? "On hold" : "Connected" }
  }

  func playDTMF(_ callId: CallID, digits: String) async {
    // Not used by this example (Dialtone calls are app-to-app).
  }

  func audioSessionActivated() async {
    // CallKitProviderDelegate has already enabled WebRTC audio (CallAudioSession).
  }

  func audioSessionDeactivated() async {}

  // MARK: Signaling events

  private func runSignalingEvents() async {
    for await event in signaling.events {
      switch event {
      case .connected(let welcome):
        welcomed = true
        await iceCache.update(servers: welcome.iceServers, ttl: welcome.iceServersTtl)
        for callId in awaitingGetCall { sendGetCall(callId) }
      case .disconnected:
        welcomed = false
      case .resynced:
        // The session was not resumed: ask the server how our calls stand.
        for callId in Set(engines.keys).union(awaitingGetCall) { sendGetCall(callId) }
      case .message(let message):
        await route(message)
      case .stopped(let reason):
        welcomed = false
        for (callId, engine) in engines {
          await engine.hangup()
          await coordinator.remoteEnded(callId: callId, reason: .failed)
        }
        engines.removeAll()
        publish(nil)
        _ = reason
      }
    }
  }

  private func route(_ message: ServerMessage) async {
    switch message {
    case .invite(let invite):
      await handleInvite(invite)
    case .callEnded(let ended):
      if let engine = engines.removeValue(forKey: ended.callId) { await engine.handle(message) }
      await coordinator.remoteEnded(callId: ended.callId, reason: ended.reason)
      if snapshot?.callId == ended.callId { publish(nil) }
    default:
      if let callId = message.callId, let engine = engines[callId] { await engine.handle(message) }
    }
  }

  private func handleInvite(_ invite: ServerMessage.Invite) async {
    guard engines[invite.callId] == nil else { return }  // a re-delivered invite
    // Reported to CallKit here unless a push already did (then this only records the invite).
    guard
      let uuid = await coordinator.incomingInvite(
        callId: invite.callId, handle: invite.from.userId, displayName: invite.from.name, hasVideo: invite.video)
    else { return }  // refused by the system; the coordinator declined it
    awaitingGetCall.remove(invite.callId)
    #if os(iOS)
    CallAudioSession.shared.prepare(video: invite.video)
    #endif
    let engine = CallEngine(
      incoming: invite, iceServers: await iceCache.current(), factory: factory,
      signaling: SignalingBridge(client: signaling))
    engines[invite.callId] = engine
    publish(CallSnapshot(
      callId: invite.callId, uuid: uuid, remote: invite.from.name ?? invite.from.userId, status: "Ringing",
      isVideoEnabled: invite.video))
    observe(engine, uuid: uuid)
    await engine.start()
    if answerOnInvite.remove(invite.callId) != nil {
      await engine.accept()
    } else if glareSurvivors.remove(invite.callId) != nil {
      try? await ui.requestAnswer(uuid: uuid)
    }
  }

  private func sendGetCall(_ callId: CallID) {
    let client = signaling
    Task {
      let state: CallState?
      do {
        let reply = try await client.request { .getCall(.init(id: $0, callId: callId)) }
        if case .ack(let ack) = reply { state = ack.call } else { state = nil }  // not-found
      } catch {
        state = nil  // stopped: the coordinator ends the call as failed
      }
      await self.resolved(callId, state: state)
    }
  }

  private func resolved(_ callId: CallID, state: CallState?) async {
    awaitingGetCall.remove(callId)
    await coordinator.resolvePushedCall(callId: callId, state: state)
    // After a resync: an engine whose call is over on the server ends too.
    if let engine = engines[callId], state == nil || state?.state == .ended {
      engines[callId] = nil
      await engine.hangup()
      await coordinator.remoteEnded(callId: callId, reason: state?.endReason ?? .connectionLost)
      if snapshot?.callId == callId { publish(nil) }
    }
  }

  // MARK: Engine states → coordinator + UI

  private func observe(_ engine: CallEngine, uuid: UUID) {
    let callId = engine.callId
    Task {
      for await state in engine.states {
        await self.engine(callId, changedTo: state)
      }
    }
  }

  private func engine(_ callId: CallID, changedTo state: CallEngine.State) async {
    switch state {
    case .idle, .incoming:
      break
    case .calling:
      await coordinator.outgoingCallStartedConnecting(callId: callId)
    case .ringing:
      update(callId) { $0.status = "Ringing…" }
    case .connecting:
      update(callId) { $0.status = "Connecting…" }
    case .connected:
      await coordinator.callConnected(callId: callId)  // fulfils CallKit's answer action
      update(callId) { $0.status = "Connected" }
    case .reconnecting:
      update(callId) { $0.status = "Reconnecting…" }
    case .ended(let ending):
      engines[callId] = nil
      switch ending {
      case .local:
        break  // ended through CallKit (performEnd) already
      case .remote(let reason):
        await coordinator.remoteEnded(callId: callId, reason: reason)
      case .glare(let survivor):
        glareSurvivors.insert(survivor)
        await coordinator.remoteEnded(callId: callId, reason: .glare)
      case .iceFailed, .error:
        await coordinator.remoteEnded(callId: callId, reason: .failed)
      }
      if snapshot?.callId == callId { publish(nil) }
    }
  }

  // MARK: Video

  private func runPeerConnections() async {
    for await connection in factory.created {
      #if os(iOS)
      if let source = connection.videoSource {
        let camera = CameraCapture(source: source)
        cameras[ObjectIdentifier(connection)] = camera
        Task { await camera.start() }
      }
      #endif
      let sink = remoteVideoSink
      Task {
        for await track in connection.remoteVideoTracks { sink.yield(track) }
        sink.yield(nil)
        await self.connectionFinished(ObjectIdentifier(connection))
      }
    }
  }

  private func connectionFinished(_ id: ObjectIdentifier) async {
    if let camera = cameras.removeValue(forKey: id) { await camera.stop() }
  }

  // MARK: UI state

  private func update(_ callId: CallID, _ change: (inout CallSnapshot) -> Void) {
    guard var s = snapshot, s.callId == callId else { return }
    change(&s)
    publish(s)
  }

  private func publish(_ s: CallSnapshot?) {
    snapshot = s
    snapshotSink.yield(s)
  }
}

/// `CallSignaling` for CallEngine: each request goes through SignalingClient (which survives
/// reconnects); an `error` reply is a failure.
struct SignalingBridge: CallSignaling {
  let client: SignalingClient

  func send(_ request: CallSignalingRequest) async throws {
    let reply = try await client.request { request.clientMessage(id: $0) }
    if case .error(let e) = reply { throw SignalingBridgeError.rejected(e.code, e.message) }
  }
}

enum SignalingBridgeError: Error {
  case rejected(ErrorCode, String)
}

/// Remembers the last path's interfaces, empty when unsatisfied (touched only on the
/// monitor's queue). A change after the first update means the network switched.
private final class PathSeen: @unchecked Sendable {
  private var last: [String]?
  func changed(to interfaces: [String]) -> Bool {
    defer { last = interfaces }
    return last != nil && last != interfaces
  }
}

/// Breaks the construction cycle coordinator ↔ service.
private final class CoordinatorRef: @unchecked Sendable {
  private let lock = NSLock()
  private var value: IncomingCallCoordinator?
  func set(_ c: IncomingCallCoordinator) { lock.withLock { value = c } }
  func get() -> IncomingCallCoordinator {
    guard let c = lock.withLock({ value }) else { preconditionFailure("CallService.bind(_:) was not called") }
    return c
  }
}
