import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A device's calls under the OS call UI (CallKit on iOS): it owns the `CallClient` and runs
/// `SystemCallCoordinator`, so an app's PushKit and CallKit delegates only forward to it.
///
/// Everything the OS, signaling, the engines and timers say goes through one inbox and is
/// handled in arrival order by the coordinator; its effects run at once (OS reports, action
/// settlement, audio, camera) or, for signaling and media work, in one ordered lane that never
/// holds up the inbox. Nothing touches the network before `goOnline()` or a reported push.
///
/// Group rings (a group push, or a `group-invite`) go through the same inbox: the session owns
/// each `GroupCall`'s events (the app sees them again on `groupEvents`) and, for LiveKit group
/// calls, drives the app's `GroupMediaControl`. Group calls the app starts
/// (`startGroupCall`, `joinRoom`) are placed through the OS like 1:1 dials.
public actor SystemCallSession {
  /// What the app's UI shows of a call.
  public struct CallStatus: Sendable, Equatable {
    public enum Phase: String, Sendable, Equatable {
      /// Incoming, ringing here.
      case incoming
      /// Outgoing, not yet ringing anywhere.
      case dialing
      /// Outgoing, a callee device is alerting.
      case remoteRinging
      case connecting
      case connected
      case reconnecting
      case ended
    }

    public var callId: CallID
    public var uuid: UUID
    public var direction: SystemCallCoordinator.Direction
    /// The remote user id and, when known, their display name.
    public var handle: String
    public var displayName: String?
    public var phase: Phase
    public var isMuted = false
    public var isOnHold = false
    /// The other side holds the call (`hold`): show "on hold"; no audio comes from it meanwhile.
    public var isRemoteOnHold = false
    public var isVideoEnabled: Bool
    /// A group call (`handle` is its creator, `displayName` its title or the creator's name).
    public var isGroup = false
    /// This device's camera in the call.
    public var localVideo = LocalVideo.off
    /// The microphone's permission: anything but `.granted` means the other side hears nothing
    /// from this device (a call answered on the lock screen of a fresh install).
    public var microphone = MediaAuthorization.granted

    /// This device's camera in a call, for the UI.
    public enum LocalVideo: String, Sendable, Equatable {
      /// Not sending video: an audio call, the camera turned off, or not answered yet.
      case off
      case on
      /// Wanted, but the app is not active (a call answered on the lock screen): iOS lets no
      /// background app capture. The camera starts when the app becomes active; show "video
      /// paused" meanwhile (the other side is told the camera is off).
      case paused
      /// Wanted, but the user has not allowed the camera.
      case unavailable

      /// What a call's camera does, from whether it is wanted, the app's state and the camera's
      /// permission.
      public init(wanted: Bool, applicationActive: Bool, camera: MediaAuthorization) {
        if !wanted {
          self = .off
        } else if camera != .granted {
          self = .unavailable
        } else {
          self = applicationActive ? .on : .paused
        }
      }
    }
  }

  /// An event of one of the session's group calls, passed on to the app.
  public struct GroupEvent: Sendable {
    public var callId: CallID
    public var event: GroupCall.Event
  }

  /// The call client, for `engine(for:)` and stats. Its `events` are the session's: do not
  /// iterate them elsewhere (the stream has one consumer).
  public nonisolated let client: CallClient
  /// Every change of a call's status, ending with `.ended`.
  public nonisolated let statuses: AsyncStream<CallStatus>
  /// Every event of the session's group calls (participants, remote streams, errors, ...), as
  /// `GroupCall.events` would give them: the session consumes those streams itself. One
  /// consumer; the newest 256 are kept for a slow one.
  public nonisolated let groupEvents: AsyncStream<GroupEvent>

  private enum Input: Sendable {
    case event(SystemCallCoordinator.Event)
    case action(SystemCallAction, any SystemCallActionHandle)
  }

  private enum Command: Sendable {
    case connect(CallID)
    case dial(CallID, to: String, video: Bool)
    case answer(CallID)
    case end(CallID)
    case setMuted(CallID, Bool)
    case setHeld(CallID, Bool)
    case setVideo(CallID, Bool)
    case pauseCamera(CallID, Bool)
    case resolveGroup(CallID)
    case joinGroup(CallID, video: Bool)
    case declineGroup(CallID)
    case leaveGroup(CallID)
    case setGroupMuted(CallID, Bool)
    case createGroup(CallID, members: [String], title: String?, video: Bool)
    case joinRoom(CallID, room: String, video: Bool)
    case endGroupForAll(CallID)
    case inviteToGroup(CallID, members: [String])
    case removeFromGroup(CallID, userId: String)
  }

  private let ui: any SystemCallUI
  private let media: (any CallMediaControl)?
  private nonisolated let permissions: (any MediaPermissions)?
  private let groupMedia: (any GroupMediaControl)?
  private let clock: any DialtoneClock
  private nonisolated let inbox: AsyncStream<Input>.Continuation
  private nonisolated let commands: AsyncStream<Command>.Continuation
  private nonisolated let ledger = Locked(SystemCallCoordinator.PushLedger())
  /// The coordinator's room aliases (server call id → the OS call's UUID), for the app's calls.
  private nonisolated let aliases = Locked([CallID: UUID]())
  private nonisolated let paths = Locked(NetworkPathWatch())
  private nonisolated let started = Locked(false)
  private nonisolated let statusSink: AsyncStream<CallStatus>.Continuation
  private nonisolated let groupEventSink: AsyncStream<GroupEvent>.Continuation
  private let inputs: AsyncStream<Input>
  private let commandStream: AsyncStream<Command>

  private var coordinator: SystemCallCoordinator
  private var pendingActions: [UUID: any SystemCallActionHandle] = [:]
  private var timers: [SystemCallCoordinator.Timer: Task<Void, Never>] = [:]
  private var engineStates: [CallID: CallEngine.State] = [:]
  /// By the OS call's UUID (a room's call id changes to the server's once joined).
  private var published: [UUID: CallStatus] = [:]
  private var online = false
  /// The group calls whose events the session reads, until their stream ends.
  private var groups: [CallID: GroupCall] = [:]
  /// Joins in flight (a join waits for the server's answer; the lane does not).
  private var joins: [CallID: Task<GroupCall, Never>] = [:]

  /// - Parameters:
  ///   - deviceId: this device's id, the `device` claim of its tokens.
  ///   - media: the audio session and camera (nil: a headless device).
  ///   - groupMedia: the app's own SFU media for LiveKit group calls (nil: none; Janus group
  ///     calls need none).
  ///   - permissions: the OS's microphone and camera permissions (nil: nothing to ask, as on a
  ///     headless device).
  ///   - applicationActive: whether the app is active now (a push-launched app is not); later
  ///     changes come through `applicationDidBecomeActive()` / `applicationDidEnterBackground()`.
  ///   - log: where the calls' logs go (give the `SignalingClient` the same one).
  public init(
    signaling: SignalingClient, iceServers: IceServerCache, factory: any PeerConnectionFactory, ui: any SystemCallUI,
    media: (any CallMediaControl)?, deviceId: String, clock: any DialtoneClock = SystemClock(),
    policy: CallEngine.Policy = .init(), pushResolutionTimeout: Duration = .seconds(30),
    groupMedia: (any GroupMediaControl)? = nil, permissions: (any MediaPermissions)? = nil,
    applicationActive: Bool = true, log: Log = .silent
  ) {
    var configuration = CallClient.Configuration()
    configuration.policy = policy
    configuration.log = log
    // The survivor is answered through the OS (an answer transaction), so its UI stays in step.
    configuration.acceptGlareSurvivor = false
    client = CallClient(
      signaling: signaling, iceServers: iceServers, factory: factory, clock: clock, configuration: configuration)
    self.ui = ui
    self.media = media
    self.groupMedia = groupMedia
    self.permissions = permissions
    self.clock = clock
    coordinator = SystemCallCoordinator(
      deviceId: deviceId, pushResolutionTimeout: pushResolutionTimeout, applicationActive: applicationActive)
    (inputs, inbox) = AsyncStream<Input>.makeStream(bufferingPolicy: .unbounded)
    (commandStream, commands) = AsyncStream<Command>.makeStream(bufferingPolicy: .unbounded)
    (statuses, statusSink) = AsyncStream<CallStatus>.makeStream(bufferingPolicy: .bufferingNewest(64))
    (groupEvents, groupEventSink) = AsyncStream<GroupEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
  }

  /// Starts listening (to the OS, signaling and timers); no network. Call at launch, before
  /// PushKit's registry exists. Idempotent.
  public nonisolated func start() {
    guard
      started.withLock({ was in
        defer { was = true }
        return !was
      })
    else { return }
    Task { await self.runInbox() }
    Task { await self.runCommands() }
    Task { await self.runClientEvents() }
  }

  /// Connects signaling and pre-warms the ICE servers (the app came to the foreground, or a
  /// pushed call was reported). Idempotent.
  public func goOnline() async {
    guard !online else { return }
    online = true
    await client.start()
  }

  /// Ends every call and disconnects (sign-out). Calls still on the OS screen are reported
  /// ended. The session is done afterwards: the next sign-in makes a new one.
  public func stop() async {
    await client.stop()
  }

  // MARK: From PushKit

  /// Reports a VoIP push to the OS *before returning*, as iOS requires of PushKit's delegate
  /// method; the network is touched only once the OS has answered the report. Returns false
  /// when nothing was reported (allowed only when `mustReport` is false).
  @discardableResult
  public nonisolated func receiveVoIPPush(_ payload: [AnyHashable: Any], mustReport: Bool = true) -> Bool {
    guard let report = SystemCallCoordinator.reportPlan(for: payload, ledger: ledger.current, mustReport: mustReport)
    else { return false }
    let inbox = inbox
    ui.reportNewIncomingCall(report) { error in inbox.yield(.event(.reported(report, accepted: error == nil))) }
    return true
  }

  // MARK: From the OS call UI (CXProviderDelegate), in the order the OS calls them

  public nonisolated func perform(_ action: SystemCallAction, handle: any SystemCallActionHandle) {
    inbox.yield(.action(action, handle))
  }

  public nonisolated func timedOutPerforming(actionId: UUID) {
    inbox.yield(.event(.actionTimedOut(actionId: actionId)))
  }

  public nonisolated func didActivateAudioSession() { inbox.yield(.event(.audioActivated)) }
  public nonisolated func didDeactivateAudioSession() { inbox.yield(.event(.audioDeactivated)) }
  public nonisolated func providerDidReset() { inbox.yield(.event(.reset)) }

  // MARK: From the app's group media (LiveKit)

  /// The app's `GroupMediaControl` reports its room for a group call: `.connected` once this
  /// device's media are up (the answer action is then fulfilled), `.failed` when the room is
  /// gone for good (the call ends as `.failed`).
  public nonisolated func groupMediaStateChanged(_ callId: CallID, _ state: PeerConnectionState) {
    inbox.yield(.event(.groupMedia(callId, state)))
  }

  /// Every update of the network path monitor (`interfaces` empty when unsatisfied). A switch
  /// (Wi-Fi ↔ cellular) reconnects signaling at once; media recovers through ICE restarts.
  public nonisolated func networkPathChanged(interfaces: [String]) {
    guard paths.withLock({ $0.update(interfaces: interfaces) }) else { return }
    let client = client
    Task { await client.networkChanged() }
  }

  // MARK: From the app's life cycle

  /// The app became active (foreground): a camera a call waits for starts.
  public nonisolated func applicationDidBecomeActive() { inbox.yield(.event(.applicationActive(true))) }
  /// The app went to the background: a running camera pauses (iOS stops background capture).
  public nonisolated func applicationDidEnterBackground() { inbox.yield(.event(.applicationActive(false))) }

  // MARK: Microphone and camera permissions

  /// The microphone's and camera's permissions now (`.unrestricted` without `MediaPermissions`).
  public nonisolated var mediaAccess: MediaAccess {
    guard let permissions else { return .unrestricted }
    return MediaAccess(
      microphone: permissions.authorization(for: .microphone), camera: permissions.authorization(for: .camera))
  }

  /// Asks, in the foreground, for what a call needs and was never asked: the microphone, and
  /// the camera if `video`. Call it at onboarding, not at the first call: a call answered on the
  /// lock screen cannot show the OS prompt, and without the microphone it is silent.
  @discardableResult
  public func requestMediaAccess(video: Bool) async -> MediaAccess {
    if let permissions {
      for device in mediaAccess.toAsk(video: video) { _ = await permissions.requestAccess(to: device) }
    }
    publishStatuses()
    return mediaAccess
  }

  /// The media permissions a call about to be placed needs, asked for now (the user is placing
  /// it, so the app is in the foreground); a call the other side would not hear is refused.
  private func checkPlacing(video: Bool) async throws(CallPermissionError) {
    if let refusal = await requestMediaAccess(video: video).refusalToPlace() { throw refusal }
  }

  // MARK: From the app's UI

  /// Places a call through the OS (start-call transaction, then the engine dials). Asks for the
  /// microphone (and, for video, the camera) if it never did; throws, placing nothing, when the
  /// microphone is not allowed: the other side would hear silence. Without the camera a video
  /// call is placed all the same (the status says `localVideo` is `.unavailable`).
  @discardableResult
  public func dial(_ userId: String, displayName: String? = nil, video: Bool = false) async throws(CallPermissionError)
    -> CallID
  {
    try await checkPlacing(video: video)
    let callId = CallIDRules.generate()
    await goOnline()
    inbox.yield(.event(.dial(callId: callId, to: userId, displayName: displayName, video: video)))
    return callId
  }

  /// Starts a group call through the OS (start-call transaction, then `group-create`); its
  /// members ring. Returns its call id. Refused like `dial` without the microphone.
  @discardableResult
  public func startGroupCall(members: [String], title: String? = nil, video: Bool = false)
    async throws(CallPermissionError) -> CallID
  {
    try await checkPlacing(video: video)
    let callId = CallIDRules.generate()
    await goOnline()
    inbox.yield(.event(.startGroup(callId: callId, members: members, title: title, video: video)))
    return callId
  }

  /// Joins (or starts) the live call of a room through the OS (start-call transaction, then
  /// `room-join`). Returns the id proposed to the server, whose UUID the OS shows; once joined,
  /// the call's status carries the room's live call id, which may differ. Either id works for
  /// `hangUp` and `setMuted`. Refused like `dial` without the microphone.
  @discardableResult
  public func joinRoom(_ name: String, video: Bool = false) async throws(CallPermissionError) -> CallID {
    try await checkPlacing(video: video)
    let callId = CallIDRules.generate()
    await goOnline()
    inbox.yield(.event(.joinRoom(callId: callId, room: name, video: video)))
    return callId
  }

  /// The in-app hang-up button: an end transaction, so the OS UI stays in step.
  public nonisolated func hangUp(_ callId: CallID) {
    request(.end(uuid: uuid(for: callId)))
  }

  public nonisolated func setMuted(_ callId: CallID, _ muted: Bool) {
    request(.setMuted(uuid: uuid(for: callId), muted: muted))
  }

  /// Rings more users into a group call this device is in (`group-invite`; who may is the
  /// server's policy). Not an OS action: the answer comes as the call's `participants` event in
  /// `groupEvents`, a refusal as its `error` event. `callId`: the call's id as its status shows it.
  public nonisolated func invite(_ members: [String], to callId: CallID) {
    commands.yield(.inviteToGroup(callId, members: members))
  }

  /// Takes a member out of a group call this user owns (`group-remove`); answered like `invite`.
  public nonisolated func remove(_ userId: String, from callId: CallID) {
    commands.yield(.removeFromGroup(callId, userId: userId))
  }

  public nonisolated func setOnHold(_ callId: CallID, _ held: Bool) {
    request(.setHeld(uuid: uuid(for: callId), held: held))
  }

  private nonisolated func uuid(for callId: CallID) -> UUID {
    aliases.current[callId] ?? CallUUIDs.uuid(for: callId)
  }

  public nonisolated func setVideoEnabled(_ callId: CallID, _ enabled: Bool) {
    inbox.yield(.event(.videoToggled(callId, enabled: enabled)))
  }

  public var calls: [SystemCallCoordinator.Call] { coordinator.activeCalls }

  // MARK: The inbox

  private func runInbox() async {
    for await input in inputs { process(input) }
  }

  private func process(_ input: Input) {
    let event: SystemCallCoordinator.Event
    switch input {
    case .event(.actionTimedOut(let id)):
      // Never settled from now on, whatever the coordinator says.
      pendingActions[id] = nil
      event = .actionTimedOut(actionId: id)
    case .event(let e):
      event = e
    case .action(let action, let handle):
      pendingActions[action.id] = handle
      event = .action(action)
    }
    if case .engine(let callId, let state) = event { engineStates[callId] = state }
    let effects = coordinator.handle(event, now: clock.now)
    let snapshot = coordinator.ledger
    ledger.withLock { $0 = snapshot }
    let roomAliases = coordinator.aliases
    aliases.withLock { $0 = roomAliases }
    for effect in effects { run(effect) }
    publishStatuses()
  }

  private func run(_ effect: SystemCallCoordinator.Effect) {
    let inbox = inbox
    switch effect {
    case .reportIncoming(let report):
      ui.reportNewIncomingCall(report) { error in inbox.yield(.event(.reported(report, accepted: error == nil))) }
    case .reportOutgoingStartedConnecting(let uuid): ui.reportOutgoingCallStartedConnecting(uuid: uuid)
    case .reportOutgoingConnected(let uuid): ui.reportOutgoingCallConnected(uuid: uuid)
    case .reportEnded(let uuid, let reason): ui.reportCallEnded(uuid: uuid, reason: reason)
    case .reportUpdated(let uuid, let video): ui.reportCallUpdated(uuid: uuid, hasVideo: video)
    case .request(let transaction): request(transaction)
    case .fulfill(let id): pendingActions.removeValue(forKey: id)?.fulfill()
    case .fail(let id): pendingActions.removeValue(forKey: id)?.fail()
    case .connect(let callId): commands.yield(.connect(callId))
    case .dial(let callId, let to, let video): commands.yield(.dial(callId, to: to, video: video))
    case .answer(let callId): commands.yield(.answer(callId))
    case .end(let callId, _): commands.yield(.end(callId))
    case .setMuted(let callId, let muted): commands.yield(.setMuted(callId, muted))
    case .setHeld(let callId, let held): commands.yield(.setHeld(callId, held))
    case .setVideo(let callId, let enabled): commands.yield(.setVideo(callId, enabled))
    case .prepareAudio(let video): media?.prepareAudio(video: video)
    case .audioActivated:
      media?.audioSessionActivated()
      groupMedia?.audioSessionActivated()
    case .audioDeactivated:
      media?.audioSessionDeactivated()
      groupMedia?.audioSessionDeactivated()
    case .startCamera: media?.startCamera()
    case .stopCamera: media?.stopCamera()
    case .cameraPaused(let callId, let paused): commands.yield(.pauseCamera(callId, paused))
    case .arm(let timer, let deadline): arm(timer, at: deadline)
    case .cancel(let timer): timers.removeValue(forKey: timer)?.cancel()
    case .resolveGroup(let callId): commands.yield(.resolveGroup(callId))
    case .joinGroup(let callId, let video): commands.yield(.joinGroup(callId, video: video))
    case .declineGroup(let callId): commands.yield(.declineGroup(callId))
    case .leaveGroup(let callId): commands.yield(.leaveGroup(callId))
    case .setGroupMuted(let callId, let muted):
      commands.yield(.setGroupMuted(callId, muted))
      if coordinator.call(callId)?.externalMedia == true { groupMedia?.setMuted(callId: callId, muted: muted) }
    case .connectGroupMedia(let callId, let url, let token, let video, let muted):
      groupMedia?.connect(callId: callId, url: url, token: token, video: video, muted: muted)
    case .disconnectGroupMedia(let callId): groupMedia?.disconnect(callId: callId)
    case .createGroup(let callId, let members, let title, let video):
      commands.yield(.createGroup(callId, members: members, title: title, video: video))
    case .joinRoom(let callId, let room, let video): commands.yield(.joinRoom(callId, room: room, video: video))
    case .endGroupForAll(let callId): commands.yield(.endGroupForAll(callId))
    }
  }

  private nonisolated func request(_ transaction: SystemCallTransaction) {
    let inbox = inbox
    ui.request(transaction) { error in
      if error != nil { inbox.yield(.event(.transactionFailed(transaction))) }
    }
  }

  private func arm(_ timer: SystemCallCoordinator.Timer, at deadline: Date) {
    timers[timer]?.cancel()
    let delay = Duration.seconds(max(0, deadline.timeIntervalSince(clock.now)))
    let inbox = inbox
    timers[timer] = Task { [clock] in
      do { try await clock.sleep(for: delay) } catch { return }
      inbox.yield(.event(.timerFired(timer)))
    }
  }

  // MARK: The signaling and media lane

  private func runCommands() async {
    for await command in commandStream { await execute(command) }
  }

  private func execute(_ command: Command) async {
    switch command {
    case .connect(let callId):
      await goOnline()
      await client.resolve(callId)
    case .dial(let callId, let to, let video):
      await goOnline()
      observe(await client.dial(to, video: video, callId: callId))
    case .answer(let callId):
      await client.answer(callId)
    case .end(let callId):
      await client.end(callId)
    case .setMuted(let callId, let muted):
      await client.engine(for: callId)?.setMuted(muted)
      updateStatus(callId) { $0.isMuted = muted }
    case .setHeld(let callId, let held):
      await client.engine(for: callId)?.setOnHold(held)
      updateStatus(callId) { $0.isOnHold = held }
    case .setVideo(let callId, let enabled):
      guard let engine = await client.engine(for: callId) else { return }
      // The camera on in an audio call upgrades it (renegotiation); off keeps the video
      // section and tells the other side (`media-state`).
      if enabled, await !engine.sendsVideo { await engine.setSendsVideo(true) }
      await engine.setVideoEnabled(enabled)
    case .pauseCamera(let callId, let paused):
      // The peer hears the camera is off (media-state) rather than seeing video freeze.
      await client.engine(for: callId)?.setVideoEnabled(!paused)
    case .resolveGroup(let callId):
      await goOnline()
      await client.resolveGroup(callId)
    case .joinGroup(let callId, let video):
      await goOnline()
      let client = client
      let join = Task { await client.joinGroup(callId, video: video) }
      joins[callId] = join
      Task {
        let group = await join.value
        self.joined(group, join)
      }
    case .declineGroup(let callId):
      await client.declineGroup(callId)
    case .leaveGroup(let callId):
      await groupCall(callId)?.leave()
    case .setGroupMuted(let callId, let muted):
      await groupCall(callId)?.setMuted(muted)
      updateStatus(callId) { $0.isMuted = muted }
    case .createGroup(let callId, let members, let title, let video):
      await goOnline()
      let client = client
      let join = Task { await client.createGroup(members: members, video: video, title: title, callId: callId) }
      joins[callId] = join
      Task {
        let group = await join.value
        self.joined(group, join)
      }
    case .joinRoom(let proposed, let room, let video):
      await goOnline()
      let client = client
      let inbox = inbox
      Task {
        do {
          let group = try await client.joinRoom(room, video: video, callId: proposed)
          self.roomJoined(group, proposed: proposed)
        } catch {
          inbox.yield(.event(.roomJoined(proposed: proposed, callId: nil)))
        }
      }
    case .endGroupForAll(let callId):
      await groupCall(callId)?.endForAll()
    case .inviteToGroup(let callId, let members):
      // Its answer is not waited for here: the commands after it go on meanwhile.
      guard let group = await groupCall(callId) else { return }
      Task { await group.invite(members) }
    case .removeFromGroup(let callId, let userId):
      guard let group = await groupCall(callId) else { return }
      Task { await group.remove(userId) }
    }
  }

  /// The room's call is known: the coordinator learns its id before any of its events.
  private func roomJoined(_ group: GroupCall, proposed: CallID) {
    inbox.yield(.event(.roomJoined(proposed: proposed, callId: group.callId)))
    observe(group)
  }

  private func joined(_ group: GroupCall, _ join: Task<GroupCall, Never>) {
    if joins[group.callId] == join { joins[group.callId] = nil }
    observe(group)
  }

  /// The group call a command is for. A join just started has registered its call with the
  /// client before it waits for the server; only in the moment before that is the join awaited.
  private func groupCall(_ callId: CallID) async -> GroupCall? {
    if let group = groups[callId] { return group }
    if let group = await client.group(for: callId) { return group }
    return await joins[callId]?.value
  }

  // MARK: Signaling events

  private func runClientEvents() async {
    for await event in client.events {
      switch event {
      case .connected, .disconnected:
        break
      case .incoming(let engine):
        let peer = await engine.remotePeer
        let video = await engine.hasVideo
        inbox.yield(
          .event(
            .invite(
              callId: engine.callId, handle: peer?.userId ?? SystemCallCoordinator.unknownHandle,
              displayName: peer?.name, video: video)))
        observe(engine)
      case .glare(let replaced, let survivor):
        inbox.yield(.event(.glare(replaced: replaced, survivor: survivor)))
      case .resolved(let callId, let state):
        inbox.yield(.event(.resolved(callId, state)))
      case .stopped:
        inbox.yield(.event(.signalingStopped))
      case .groupIncoming(let group):
        observe(group)
        let invite: ServerMessage.GroupInvite? = {
          if case .invited(let invite) = group.entry { return invite }
          return nil
        }()
        inbox.yield(
          .event(
            .groupInvite(
              callId: group.callId, handle: invite?.from.userId ?? SystemCallCoordinator.unknownHandle,
              displayName: SystemCallCoordinator.groupDisplayName(title: invite?.title, creatorName: invite?.from.name),
              video: group.video)))
      case .groupResolved(let callId, let state, let userId):
        inbox.yield(.event(.groupResolved(callId, state, userId: userId)))
      }
    }
  }

  /// Reads a group call's events (once per call object): its state and this device's media go
  /// to the coordinator, every event to `groupEvents`.
  private func observe(_ group: GroupCall) {
    let callId = group.callId
    guard groups[callId] !== group else { return }
    groups[callId] = group
    let inbox = inbox
    let sink = groupEventSink
    Task {
      for await event in group.events {
        switch event {
        case .state(let state): inbox.yield(.event(.groupState(callId, state)))
        case .publisherState(let state): inbox.yield(.event(.groupMedia(callId, state)))
        case .liveKit(let url, let token): inbox.yield(.event(.groupLiveKit(callId, url: url, token: token)))
        case .participants(let state): inbox.yield(.event(.groupParticipants(callId, state)))
        case .remoteStreamAdded, .remoteStreamState, .remoteStreamRemoved, .error: break
        }
        sink.yield(GroupEvent(callId: callId, event: event))
      }
      self.forget(group)
    }
  }

  private func forget(_ group: GroupCall) {
    if groups[group.callId] === group { groups[group.callId] = nil }
  }

  private nonisolated func observe(_ engine: CallEngine) {
    let inbox = inbox
    let callId = engine.callId
    Task {
      for await state in engine.states { inbox.yield(.event(.engine(callId, state))) }
    }
    Task {
      for await sends in engine.remoteVideo { inbox.yield(.event(.remoteVideo(callId, sends: sends))) }
    }
    Task {
      for await held in engine.remoteHold { await self.remoteHeld(callId, held) }
    }
  }

  private func remoteHeld(_ callId: CallID, _ held: Bool) {
    updateStatus(callId) { $0.isRemoteOnHold = held }
  }

  // MARK: Statuses

  private func publishStatuses() {
    var seen: Set<UUID> = []
    let access = mediaAccess
    for call in coordinator.activeCalls {
      seen.insert(call.uuid)
      var status =
        published[call.uuid]
        ?? CallStatus(
          callId: call.callId, uuid: call.uuid, direction: call.direction, handle: call.handle,
          displayName: call.displayName, phase: .incoming, isVideoEnabled: call.video, isGroup: call.isGroup)
      status.callId = call.callId
      status.phase = Self.phase(of: call, engine: engineStates[call.callId])
      status.isVideoEnabled = call.video
      status.localVideo = CallStatus.LocalVideo(
        wanted: call.cameraOn, applicationActive: coordinator.applicationActive, camera: access.camera)
      status.microphone = access.microphone
      publish(status)
    }
    for (uuid, var status) in published where !seen.contains(uuid) {
      status.phase = .ended
      publish(status)
      published[uuid] = nil
      engineStates[status.callId] = nil
    }
  }

  private func updateStatus(_ callId: CallID, _ change: (inout CallStatus) -> Void) {
    guard var status = published[coordinator.uuid(for: callId)] else { return }
    change(&status)
    publish(status)
  }

  private func publish(_ status: CallStatus) {
    guard published[status.uuid] != status || status.phase == .ended else { return }
    if status.phase != .ended { published[status.uuid] = status }
    statusSink.yield(status)
  }

  static func phase(of call: SystemCallCoordinator.Call, engine: CallEngine.State?) -> CallStatus.Phase {
    switch engine {
    case .connected?: return .connected
    case .reconnecting?: return .reconnecting
    case .connecting?: return .connecting
    case .ringing?: return .remoteRinging
    case .ended?: return .ended
    case .idle?, .calling?, .incoming?, nil:
      switch call.stage {
      case .ringing: return .incoming
      case .answering: return .connecting
      case .dialing: return .dialing
      case .connected: return .connected
      }
    }
  }
}
