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

/// The example's glue between the SDK pieces. It holds no call rules: `CallClient` routes
/// signaling to `CallEngine`s (multi-device, glare, answer-before-invite, resync), each engine
/// negotiates media, and `IncomingCallCoordinator` applies the CallKit/PushKit rules. This actor
/// only forwards between them (the `CallSignalingActions` the coordinator asks for) and keeps
/// the UI's snapshot.
actor CallService: CallSignalingActions {
  let client: CallClient
  let ui: CallKitSystemCallUI
  let factory = WebRTCPeerConnectionFactory.shared
  nonisolated let snapshots: AsyncStream<CallSnapshot?>
  nonisolated let remoteVideo: AsyncStream<RTCVideoTrack?>
  private let snapshotSink: AsyncStream<CallSnapshot?>.Continuation
  private let remoteVideoSink: AsyncStream<RTCVideoTrack?>.Continuation
  private let coordinatorRef = CoordinatorRef()

  private var snapshot: CallSnapshot?
  /// Glare survivors to answer through CallKit once the coordinator knows them.
  private var glareSurvivors: Set<CallID> = []
  private var online = false
  private var pathMonitor: NWPathMonitor?
  private var cameras: [ObjectIdentifier: CameraCapture] = [:]

  init(ui: CallKitSystemCallUI, token: @escaping @Sendable () async throws -> String, api: DialtoneAPIClient) {
    self.ui = ui
    let signaling = SignalingClient(
      configuration: .init(url: ExampleConfig.signalingURL), transport: URLSessionSignalingTransport(), token: token)
    let iceCache = IceServerCache(defaults: ExampleConfig.defaultIceServers, fetcher: { try await api.iceServers() })
    var configuration = CallClient.Configuration()
    // The survivor is answered through CallKit (a CXAnswerCallAction), so its UI stays in step.
    configuration.acceptGlareSurvivor = false
    client = CallClient(signaling: signaling, iceServers: iceCache, factory: WebRTCPeerConnectionFactory.shared,
                        configuration: configuration)
    (snapshots, snapshotSink) = AsyncStream<CallSnapshot?>.makeStream(bufferingPolicy: .bufferingNewest(1))
    (remoteVideo, remoteVideoSink) = AsyncStream<RTCVideoTrack?>.makeStream(bufferingPolicy: .bufferingNewest(1))
  }

  /// The coordinator is made with this service as its `signaling`, then bound here.
  nonisolated func bind(_ coordinator: IncomingCallCoordinator) { coordinatorRef.set(coordinator) }
  private var coordinator: IncomingCallCoordinator { coordinatorRef.get() }

  /// At launch (also when launched by a push): listen to the client's events, network changes
  /// and new peer connections. No network here: a launch by a VoIP push must report the call
  /// to CallKit before anything touches the network (rule 1), so going online waits for
  /// `goOnline()` (app in the foreground) or `connectForPushedCall` (after the report).
  func start() async {
    Task { await self.runClientEvents() }
    Task { await self.runPeerConnections() }
    let monitor = NWPathMonitor()
    let seen = PathSeen()
    let client = self.client
    monitor.pathUpdateHandler = { path in
      // The first update is the current path, not a change (the handler runs on one serial
      // queue, so `seen` needs no lock).
      let key = path.status == .satisfied ? path.availableInterfaces.map(\.name) : []
      guard seen.changed(to: key), !key.isEmpty else { return }
      // Wi-Fi ↔ cellular: the socket is probably dead; reconnect now. The media side
      // recovers by itself: CallEngine restarts ICE when the connection goes
      // disconnected/failed (rule 3), and the CallKit call stays up meanwhile.
      Task { await client.networkChanged() }
    }
    monitor.start(queue: DispatchQueue(label: "dialtone.path"))
    pathMonitor = monitor
  }

  /// Pre-warms ICE servers (rule 4) and connects signaling; idempotent.
  func goOnline() async {
    guard !online else { return }
    online = true
    await client.start()
  }

  // MARK: Outgoing calls (from the UI)

  func call(_ contact: Contact, video: Bool) async {
    guard snapshot == nil else { return }
    await goOnline()
    let callId = CallIDRules.generate()
    let uuid = await coordinator.startOutgoingCall(callId: callId)
    publish(CallSnapshot(callId: callId, uuid: uuid, remote: contact.name, status: "Calling…", isVideoEnabled: video))
    #if os(iOS)
    CallAudioSession.shared.prepare(video: video)
    #endif
    do {
      // CallKit → CXStartCallAction → coordinator.performStartCall → fulfilled.
      try await ui.requestStartCall(uuid: uuid, handle: contact.userId, displayName: contact.name, video: video)
    } catch {
      await coordinator.remoteEnded(callId: callId, reason: .failed)
      publish(nil)
      return
    }
    let engine = await client.dial(contact.userId, video: video, callId: callId)
    observe(engine)
  }

  // MARK: In-call controls (from the UI; they go through CallKit so its UI stays in sync)

  func toggleMute() async {
    guard let s = snapshot else { return }
    try? await ui.requestSetMuted(uuid: s.uuid, muted: !s.isMuted)
  }

  func toggleVideo() async {
    guard var s = snapshot, let engine = await client.engine(for: s.callId) else { return }
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
    await goOnline()
    await client.resolve(callId)   // sent once signaling is up; the answer arrives as .resolved
  }

  func answer(_ callId: CallID) async {
    update(callId) { $0.status = "Connecting…" }
    // Accepts the ringing engine, or the invite when it arrives (woken by a push).
    Task { await client.answer(callId) }
  }

  func end(_ callId: CallID, cause: LocalEndCause) async {
    glareSurvivors.remove(callId)
    Task { await client.end(callId) }  // cancel / decline / hangup, as the call's state says
    if snapshot?.callId == callId { publish(nil) }
  }

  func setMuted(_ callId: CallID, muted: Bool) async {
    await client.engine(for: callId)?.setMuted(muted)
    update(callId) { $0.isMuted = muted }
  }

  func setHeld(_ callId: CallID, held: Bool) async {
    await client.engine(for: callId)?.setOnHold(held)
    update(callId) { $0.status = held ? "On hold" : "Connected" }
  }

  func playDTMF(_ callId: CallID, digits: String) async {
    // Not used by this example (Dialtone calls are app-to-app).
  }

  func audioSessionActivated() async {
    // CallKitProviderDelegate has already enabled WebRTC audio (CallAudioSession).
  }

  func audioSessionDeactivated() async {}

  // MARK: Client events

  private func runClientEvents() async {
    for await event in client.events {
      switch event {
      case .connected, .disconnected:
        break
      case .incoming(let engine):
        await ring(engine)
      case .glare(_, let survivor):
        // Our outgoing call lost; answer the peer's call through CallKit.
        if let uuid = await coordinator.call(survivor)?.uuid {
          try? await ui.requestAnswer(uuid: uuid)
        } else {
          glareSurvivors.insert(survivor)
        }
      case .resolved(let callId, let state):
        await coordinator.resolvePushedCall(callId: callId, state: state)
      case .stopped:
        // Every engine was ended by the client; their states report it to CallKit.
        publish(nil)
      }
    }
  }

  private func ring(_ engine: CallEngine) async {
    guard let peer = await engine.remotePeer else { return }
    // Reported to CallKit here unless a push already did (then this only records the invite).
    guard
      let uuid = await coordinator.incomingInvite(
        callId: engine.callId, handle: peer.userId, displayName: peer.name, hasVideo: engine.isVideoEnabled)
    else { return }  // refused by the system; the coordinator declined it
    #if os(iOS)
    CallAudioSession.shared.prepare(video: await engine.isVideoEnabled)
    #endif
    publish(CallSnapshot(
      callId: engine.callId, uuid: uuid, remote: peer.name ?? peer.userId, status: "Ringing",
      isVideoEnabled: await engine.isVideoEnabled))
    observe(engine)
    if glareSurvivors.remove(engine.callId) != nil {
      try? await ui.requestAnswer(uuid: uuid)
    }
  }

  // MARK: Engine states → coordinator + UI

  private func observe(_ engine: CallEngine) {
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
      switch ending {
      case .local:
        break  // ended through CallKit (performEnd) already
      case .remote(let reason):
        await coordinator.remoteEnded(callId: callId, reason: reason)
      case .glare:
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
