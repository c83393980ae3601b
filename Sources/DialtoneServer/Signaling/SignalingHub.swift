import DialtoneCalls
import DialtoneCluster
import DialtoneCrypto
import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Owns every signaling socket and session. All state lives on this actor and changes only in
/// `handle(_:)`. The actor runs on the network thread (`NetworkExecutor`): socket events arrive
/// there in order and are handled synchronously, with no thread hop; timers and HTTP queries
/// hop in through the executor.
///
/// The hub does the transport work — handshake, authentication, seq/ack/resume, duplicate ids —
/// and hands call messages to `CallRouter`, whose effects it then applies.
public actor SignalingHub {
  struct Settings: Sendable {
    var helloTimeout: Duration
    var resumeWindow: Duration
    var heartbeatSeconds: Int
    var maxMessageBytes: Int
    var limits = ServerLimits()
  }

  /// A class, so that looking a socket up on every message costs a retain, not a struct copy.
  final class SocketState {
    let connection: WebSocketConnection
    let headerToken: String?
    /// Set by `hello`; cleared when a newer socket of the same device takes the session over.
    var session: DeliverySession?
    /// In a cluster, between the hello and its welcome (`SharedSessions.open`): what the client
    /// sends meanwhile waits here, up to `maxEarlyMessages`.
    var opening = false
    var early: [(bytes: [UInt8], isText: Bool)] = []
    var helloTimer: (any ScheduledAction)?
    /// Every message this socket sends takes a token (`ServerLimits.messagesPerSecond`).
    var messages: TokenBucket
    /// Messages refused in a row: a socket that keeps sending through its refusals is closed.
    var refusedInARow = 0

    init(
      connection: WebSocketConnection, headerToken: String?, helloTimer: (any ScheduledAction)?, messages: TokenBucket
    ) {
      self.connection = connection
      self.headerToken = headerToken
      self.helloTimer = helloTimer
      self.messages = messages
    }
  }

  let settings: Settings
  let clock: any DialtoneClock
  private let authenticator: TokenAuthenticator
  let iceServers: IceServerIssuer
  let log: Log
  var router: CallRouter
  var groups: GroupCallRouter
  private let sfu: (any SFUBackend)?
  private let effectSink: any CallEffectSink
  private let journal: CallJournal
  private let liveCalls: any LiveCallStore
  let observations: Observations
  private let quality: any QualityStore
  let remote: any RemoteDevices
  private let placement: any CallPlacement
  /// Where sessions are kept in a cluster (nil: each `DeliverySession` keeps its own).
  let shared: (any SharedSessions)?
  /// Frames for sessions being opened here, held for their welcome.
  var openingFrames: [String: [StoredFrame]] = [:]
  /// Messages a client may send between its hello and its welcome.
  static let maxEarlyMessages = 32

  /// An outcome waiting for the journal: the request's reply and the effects, applied together.
  private struct Output {
    var session: DeliverySession?
    /// A request forwarded by another node: the reply goes back there instead.
    var forwarded: ForwardedRequest?
    var requestID: String?
    var reply: ServerMessage?
    var coalesced = false
    var effects: [CallEffect]
    var wasHeld = false
    /// A relayed message's arrival: the relay latency is measured when its copy is written.
    var relayedFrom: ContinuousClock.Instant?
  }
  private var held = HeldOutcomes<Output>()
  /// Requests whose reply is held: a retry meanwhile is not answered twice (the reply is coming).
  private var heldRequests: Set<String> = []
  /// Requests other nodes forwarded, answered once however often they come.
  private var forwardedAnswers = ForwardedAnswers()
  /// Requests about calls this node is taking over, until they run here (a few per call).
  private var awaitingTakeOver: [CallID: [ForwardedRequest]] = [:]
  static let maxAwaitingTakeOver = 64
  /// Set by `prepareForShutdown()`: sockets closed by the shutdown leave their calls as they are
  /// (no grace starts), so that the restarted server carries on with them.
  var shuttingDown = false

  var sockets: [UInt64: SocketState] = [:]
  var sessions: [String: DeliverySession] = [:]
  /// user → device → session: the registry of who can be reached.
  var devices: [String: [String: DeliverySession]] = [:]
  var sessionTimers: [String: any ScheduledAction] = [:]
  private var callTimers: [CallTimer: any ScheduledAction] = [:]
  /// Open sockets by remote address (`ServerLimits.maxConnectionsPerAddress`).
  private var socketsByAddress: [String: Int] = [:]
  /// Calls started, by user (`ServerLimits.invitesPerMinute`).
  private var invites: RateLimiter<String>
  private var blocks = BlockTable()

  nonisolated let executor: NetworkExecutor
  public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

  init(
    settings: Settings, clock: any DialtoneClock, authenticator: TokenAuthenticator, iceServers: IceServerIssuer,
    router: CallRouter, groups: GroupCallRouter = GroupCallRouter(), sfu: (any SFUBackend)? = nil,
    effectSink: any CallEffectSink, journal: CallJournal, liveCalls: any LiveCallStore, executor: NetworkExecutor,
    observations: Observations, quality: any QualityStore, remote: any RemoteDevices = NoRemoteDevices(),
    placement: any CallPlacement = LocalCalls(), shared: (any SharedSessions)? = nil, log: Log
  ) {
    self.settings = settings
    self.clock = clock
    self.authenticator = authenticator
    self.iceServers = iceServers
    self.router = router
    self.groups = groups
    self.sfu = sfu
    self.effectSink = effectSink
    self.journal = journal
    self.liveCalls = liveCalls
    self.observations = observations
    self.quality = quality
    self.remote = remote
    self.placement = placement
    self.shared = shared
    self.log = log
    self.executor = executor
    invites = RateLimiter(settings.limits.inviteRate)
  }

  nonisolated var socketHandler: any WebSocketHandler { SocketEventBridge(hub: self) }

  /// Takes an event from any thread: synchronously when already on the hub's executor (socket
  /// events), otherwise by a task that starts on it (timers, the journal's commits).
  nonisolated func deliver(_ event: HubEvent) {
    if executor.isCurrent {
      assumeIsolated { $0.handle(event) }
    } else {
      Task(executorPreference: executor) { await self.handle(event) }
    }
  }

  // MARK: - Queries for the HTTP API

  func liveDevices(of userId: String) -> [(deviceId: String, connectedAt: Date)] {
    (devices[userId] ?? [:]).values.filter(\.isConnected).map { ($0.identity.deviceId, $0.connectedAt) }
      .sorted { $0.deviceId < $1.deviceId }
  }

  /// Fills the block table from the store (at start, before any socket opens).
  func loadBlocks(_ pairs: [(userId: String, blockedId: String)]) { blocks = BlockTable(pairs) }

  /// A block made or lifted through `/v1/blocks`, once it is stored: every later invite obeys it.
  func setBlock(_ userId: String, blocks other: String, _ on: Bool) { blocks.set(userId, blocks: other, on) }

  func callState(_ callId: CallID, for identity: Identity) -> CallState? {
    router.callState(callId, visibleTo: identity)
  }

  func groupState(_ callId: CallID, for identity: Identity) -> GroupCallState? {
    groups.state(callId, visibleTo: identity)
  }

  /// Sets the metrics' gauges from the hub's state (before a scrape).
  func refreshGauges() {
    let metrics = observations.metrics
    metrics.socketsOpen.set(sockets.count)
    let connected = sessions.values.reduce(0) { $0 + ($1.isConnected ? 1 : 0) }
    metrics.sessionsConnected.set(connected)
    metrics.sessionsResumable.set(sessions.count - connected)
    metrics.callsLive.set(router.liveCalls.count)
    metrics.groupCallsLive.set(groups.liveCallCount)
    shared?.refreshGauges()
  }

  /// What the admin dashboard shows live: sockets, sessions and the calls in progress.
  func liveOverview() -> (sockets: Int, sessions: Int, calls: [CallState], groupCalls: Int) {
    (sockets.count, sessions.count, router.liveCalls, groups.liveCallCount)
  }

  // MARK: - Restarts

  /// Carries on with the calls that were live when the server stopped (before any socket opens).
  func restore(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall]) {
    defer { shared?.flush() }
    emit(Output(effects: router.restore(stored, ended: ended, now: clock.now)), for: nil)
    if !stored.isEmpty { log.info("restored \(stored.count) call(s) in progress") }
  }

  func prepareForShutdown() { shuttingDown = true }

  /// Returns once every event delivered before the call has been handled (the executor runs
  /// them in order), and what they stored is flushed.
  func drained() { shared?.flush() }

  // MARK: - Handing calls between nodes

  /// Hands 1:1 calls over to another node (a draining node's, in a cluster): each leaves this
  /// hub as it is, its timers here cancelled, once every journal write of it is on disk (a call
  /// with writes pending stays until then). Returns the calls handed over.
  func relinquish(_ callIds: [CallID]) -> [CallID] {
    var handedOver: [CallID] = []
    for callId in callIds where held.isEmpty || held.pendingTicket(of: callId) == nil {
      let effects = router.relinquish(callId)
      guard !effects.isEmpty else { continue }
      apply(effects)
      handedOver.append(callId)
    }
    return handedOver
  }

  /// Takes over live calls another node handed over or lost, as read from the shared journal:
  /// carried on exactly as after a restart (deadlines kept, devices given the restart grace).
  func adopt(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall] = []) {
    emit(Output(effects: router.restore(stored, ended: ended, now: clock.now)), for: nil)
    replay(router.catchUp(stored.map(\.snapshot.callId)))
  }

  /// Sends what a taken-over call's devices may have missed: a session that had a message
  /// already (it came from the call's former node) is not given the copy (`OnceKey`).
  private func replay(_ effects: [CallEffect]) {
    apply(effects.filter { if case .send = $0 { true } else { false } })
  }

  // MARK: - Events

  func handle(_ event: HubEvent) {
    defer { shared?.flush() }
    switch event {
    case .opened(let connection, let request):
      let perAddress = settings.limits.maxConnectionsPerAddress
      if perAddress > 0, socketsByAddress[connection.remoteAddress, default: 0] >= perAddress {
        // Not tracked: its close event finds no state.
        connection.close(
          code: UInt16(CloseCode.overLimit.rawValue), reason: "more than \(perAddress) sockets from this address")
        return
      }
      socketsByAddress[connection.remoteAddress, default: 0] += 1
      observations.metrics.socketsOpened.increment()
      let timer = clock.schedule(after: settings.helloTimeout) { [self] in
        deliver(.helloDeadline(socketID: connection.id))
      }
      sockets[connection.id] = SocketState(
        connection: connection, headerToken: request.bearerToken, helloTimer: timer,
        messages: TokenBucket(settings.limits.messageRate, now: clock.now))

    case .received(let connection, let bytes, let isText):
      guard let state = sockets[connection.id] else { return }
      if let wait = state.messages.take(now: clock.now) {
        return refuseTooFast(bytes, isText: isText, socket: state, wait: wait)
      }
      state.refusedInARow = 0
      if let session = state.session {
        handleMessage(bytes, isText: isText, session: session)
      } else if state.opening {
        holdUntilWelcome(bytes, isText: isText, socket: state)
      } else {
        handleHello(bytes, isText: isText, socket: state)
      }

    case .closed(let connection, _):
      guard let state = sockets.removeValue(forKey: connection.id) else { return }
      let address = connection.remoteAddress
      if let open = socketsByAddress[address] { socketsByAddress[address] = open > 1 ? open - 1 : nil }
      state.helloTimer?.cancel()
      if let session = state.session, session.socket === connection {
        detach(session)
      }

    case .helloDeadline(let socketID):
      guard let state = sockets[socketID], state.session == nil else { return }
      state.connection.close(
        code: UInt16(CloseCode.helloTimeout.rawValue), reason: "no hello within \(Int(settings.helloTimeout.seconds)) s"
      )

    case .sessionExpiry(let sessionID):
      sessionTimers.removeValue(forKey: sessionID)
      guard let session = sessions[sessionID], !session.isConnected else { return }
      discard(session)

    case .callTimer(let timer):
      callTimers.removeValue(forKey: timer)
      if groups.knows(timer.callId) {
        let effects = persistingGroup(groups.timerFired(timer, now: clock.now), timer.callId)
        emit(Output(effects: effects), for: timer.callId)
      } else {
        emit(Output(effects: router.timerFired(timer, now: clock.now)), for: timer.callId)
      }

    case .sfu(let event):
      handleSFU(event)

    case .journalCommitted(let ticket):
      for output in held.release(upTo: ticket) { release(output) }

    case .forwarded(let request):
      handleForwarded(request)

    case .replyArrived(let sessionID, let requestID, let reply):
      replyArrived(reply, sessionID: sessionID, requestID: requestID)

    case .cluster(let letters):
      for letter in letters { handle(letter) }

    case .adopt(let stored, let ended, let connected, let request, let attempted):
      adopt(stored, ended: ended)
      for identity in connected { handle(.device(identity, connected: true, newSession: false)) }
      placement.takenOver(attempted)
      for callId in attempted.sorted() {
        for waiting in awaitingTakeOver.removeValue(forKey: callId) ?? [] { handleForwarded(waiting) }
      }
      if let request { handleForwarded(request) }

    case .relinquish(let callIds):
      let kept = Set(callIds).subtracting(relinquish(callIds))
      // Writes of theirs are still on their way to the journal: they go once those are done.
      if !kept.isEmpty {
        _ = clock.schedule(after: .milliseconds(100)) { [self] in deliver(.relinquish(kept.sorted())) }
      }

    case .sessionOpened(let opening, let outcome):
      sessionOpened(opening, outcome)
    case .framesStored(let frames):
      stored(frames)
    case .sessionsBroken(let sessionIDs):
      for id in sessionIDs { breakSession(id) }
    case .deliveryFailed(let userId):
      for session in (devices[userId] ?? [:]).values { breakSession(session.id) }
    case .clusterStateLost:
      for state in sockets.values {
        state.connection.close(
          code: UInt16(CloseCode.tryAgainLater.rawValue), reason: "the cluster lost its sessions: reconnect and resync")
      }
    case .gapCheck(let sessionID):
      checkGap(sessionID)
    }
  }

  private func replyArrived(_ reply: ServerMessage, sessionID: String, requestID: String) {
    heldRequests.remove(sessionID + "\u{0}" + requestID)
    guard let session = sessions[sessionID] else { return }
    session.answer(reply, to: requestID)
  }

  // MARK: - Letters from other nodes

  private func handle(_ letter: ClusterLetter) {
    switch letter {
    case .frame(let sessionID, let seq, let bytes):
      stored([StoredFrame(sessionID: sessionID, seq: seq, bytes: bytes)])
    case .broken(let sessionID):
      breakSession(sessionID)
    case .request(let request):
      handleForwarded(request)
    case .reply(let sessionID, let requestID, let reply):
      // The answering node stored it in the session already: it is only remembered here.
      heldRequests.remove(sessionID + "\u{0}" + requestID)
      sessions[sessionID]?.remember(reply, for: requestID)
    case .device(let identity, let connected, let newSession):
      let now = clock.now
      if connected {
        emit(Output(effects: router.deviceConnected(identity, newSession: newSession, now: now)), for: nil)
        apply(groups.deviceConnected(identity, newSession: newSession))
      } else {
        emit(Output(effects: router.deviceDisconnected(identity, now: now)), for: nil)
        apply(groups.deviceDisconnected(identity))
      }
    case .replaced(let identity, let sessionID):
      guard let session = sessions[sessionID], session.identity.userId == identity.userId,
        session.identity.deviceId == identity.deviceId
      else { return }
      log.debug("\(identity.userId)/\(identity.deviceId): \(sessionID) replaced on another node", sessionId: sessionID)
      if let socket = session.socket {
        sockets[socket.id]?.session = nil
        socket.close(code: UInt16(CloseCode.replaced.rawValue), reason: "replaced by a newer connection of this device")
      }
      discard(session)
    }
  }

  // MARK: - Limits

  /// Over its message rate: the message is answered `rate-limited` (never silently dropped),
  /// and a socket that keeps sending through a whole burst of refusals is closed.
  private func refuseTooFast(_ bytes: [UInt8], isText: Bool, socket: SocketState, wait: Duration) {
    socket.refusedInARow += 1
    let rate = settings.limits.messageRate
    if Double(socket.refusedInARow) > rate.burst {
      socket.connection.close(
        code: UInt16(CloseCode.overLimit.rawValue), reason: "kept sending over \(Int(rate.perSecond)) messages/s")
      return
    }
    let id = isText ? Self.requestID(bytes) : nil
    let error = ServerMessage.error(
      .init(
        replyTo: id, code: .rateLimited, message: "more than \(Int(rate.perSecond)) messages per second",
        retryAfterMs: wait.milliseconds))
    if let session = socket.session {
      session.deliver(error)
    } else {
      socket.connection.send(text: MessageCodec.encode(error, seq: nil))
    }
  }

  private static func requestID(_ bytes: [UInt8]) -> String? {
    do {
      return try MessageCodec.decodeClientMessage(bytes).id
    } catch {
      return error.replyTo
    }
  }

  /// What `ServerLimits.invitesPerMinute` counts: messages that ring people or open a room.
  private static func startsACall(_ message: ClientMessage) -> Bool {
    switch message {
    case .invite, .groupCreate, .roomJoin: return true
    default: return false
    }
  }

  // MARK: - Handshake

  private func handleHello(_ bytes: [UInt8], isText: Bool, socket: SocketState) {
    let connection = socket.connection
    guard !shuttingDown else {
      // A session started now would end with the process (and, in a cluster, could register
      // the device on this node after its next socket registered it on another).
      connection.close(code: UInt16(CloseCode.goingAway.rawValue), reason: "this server is shutting down")
      return
    }
    func refuse(_ error: ServerMessage.ErrorMessage, close code: CloseCode) {
      connection.send(text: MessageCodec.encode(.error(error), seq: nil))
      connection.close(code: UInt16(code.rawValue), reason: error.message)
    }
    guard isText else {
      return refuse(
        .init(code: .badRequest, message: "binary frames are not part of the protocol"), close: .protocolError)
    }
    let frame: ClientEnvelope
    do {
      frame = try MessageCodec.decodeClientMessage(bytes)
    } catch {
      return refuse(
        .init(replyTo: error.replyTo, code: error.code, message: "expected hello: \(error.message)"),
        close: .protocolError)
    }
    guard case .hello(let hello) = frame.message, let helloID = frame.id else {
      return refuse(
        .init(replyTo: frame.id, code: .invalidState, message: "the first message must be hello"),
        close: .protocolError)
    }
    guard ProtocolVersion.supported.contains(hello.version) else {
      return refuse(
        .init(
          replyTo: helloID, code: .unsupportedVersion,
          message: "version \(hello.version) is not supported (server speaks \(ProtocolVersion.supported))"),
        close: .protocolError)
    }
    guard let token = hello.token ?? socket.headerToken else {
      return refuse(
        .init(replyTo: helloID, code: .unauthorized, message: "no token in hello or Authorization header"),
        close: .unauthorized)
    }
    let identity: Identity
    do {
      identity = try authenticator.authenticate(token)
    } catch {
      return refuse(.init(replyTo: helloID, code: .unauthorized, message: error.description), close: .unauthorized)
    }

    let existing = devices[identity.userId]?[identity.deviceId]
    let maxDevices = settings.limits.maxDevicesPerUser
    if existing == nil, (devices[identity.userId]?.count ?? 0) >= maxDevices {
      return refuse(
        .init(
          replyTo: helloID, code: .limitExceeded,
          message:
            "at most \(maxDevices) devices per user are signed in at once (including sessions resumable after a drop)"),
        close: .overLimit)
    }
    socket.helloTimer?.cancel()
    let now = clock.now
    if let existing, let old = existing.socket, old !== connection {
      // Same device connected twice: the newest socket wins; the old one must not reconnect.
      sockets[old.id]?.session = nil
      old.close(code: UInt16(CloseCode.replaced.rawValue), reason: "replaced by a newer connection of this device")
    }
    if let shared {
      return openShared(hello, id: helloID, identity: identity, existing: existing, socket: socket, shared)
    }

    var resumed = false
    var resync = false
    let session: DeliverySession
    if let resume = hello.resume {
      if let existing, existing.id == resume.sessionId, existing.canResume(from: resume.lastSeq) {
        session = existing
        resumed = true
      } else {
        resync = true
        if let existing { discard(existing) }
        session = newSession(identity, connection, now)
      }
    } else {
      if let existing { discard(existing) }
      session = newSession(identity, connection, now)
    }
    sessionTimers.removeValue(forKey: session.id)?.cancel()
    sockets[connection.id]?.session = session
    sockets[connection.id]?.helloTimer = nil

    let welcome = welcome(
      replyTo: helloID, session: session.id, identity, resumed: resumed, resync: resync, features: hello.features,
      now: now)
    if resumed {
      session.attach(connection, now: now)
      session.sendUnsequenced(.welcome(welcome))
      session.resume(on: connection, lastSeq: hello.resume?.lastSeq ?? 0, now: now)
      log.debug("resumed \(session.id) for \(identity.userId)/\(identity.deviceId)", sessionId: session.id)
    } else {
      session.sendUnsequenced(.welcome(welcome))
      log.debug("new session \(session.id) for \(identity.userId)/\(identity.deviceId)", sessionId: session.id)
    }
    emit(deviceConnected: identity, newSession: !resumed, now: now)
  }

  /// The calls of a device that has a socket again learn it (a new session is rung again).
  func emit(deviceConnected identity: Identity, newSession: Bool, now: Date) {
    emit(Output(effects: router.deviceConnected(identity, newSession: newSession, now: now)), for: nil)
    apply(groups.deviceConnected(identity, newSession: newSession))
  }

  /// The welcome of a session (counted in the metrics).
  func welcome(
    replyTo helloID: String, session: String, _ identity: Identity, resumed: Bool, resync: Bool, features: [String],
    now: Date
  ) -> ServerMessage.Welcome {
    var welcome = ServerMessage.Welcome(
      replyTo: helloID, sessionId: session, userId: identity.userId, deviceId: identity.deviceId,
      resumed: resumed, resync: resync, heartbeatSeconds: settings.heartbeatSeconds,
      maxMessageBytes: settings.maxMessageBytes, iceServers: iceServers.servers(for: identity.userId, now: now),
      iceServersTtl: iceServers.ttl)
    var agreed = Set<String>()
    welcome.features = features.filter { ProtocolFeature.supported.contains($0) && agreed.insert($0).inserted }
    observations.iceServersIssued(welcome.iceServers, source: "welcome")
    observations.metrics.sessionsStarted.labels(resumed ? "resumed" : resync ? "resync" : "new").increment()
    observations.metrics.messagesReceived.labels("hello").increment()
    return welcome
  }

  static func newSessionID() -> String { "s_" + SecureRandom.token(byteCount: 12) }

  private func newSession(_ identity: Identity, _ connection: WebSocketConnection, _ now: Date) -> DeliverySession {
    let session = DeliverySession(
      id: Self.newSessionID(), identity: identity, socket: connection, now: now,
      maxUnackedBytes: settings.limits.maxUnackedBytes, sent: observations.metrics.messagesSent)
    sessions[session.id] = session
    devices[identity.userId, default: [:]][identity.deviceId] = session
    return session
  }

  func detach(_ session: DeliverySession) {
    let now = clock.now
    session.detach(now: now)
    let id = session.id
    remote.detached(session.identity, session: id, ended: false)
    sessionTimers[id]?.cancel()
    sessionTimers[id] = clock.schedule(after: settings.resumeWindow) { [self] in
      deliver(.sessionExpiry(sessionID: id))
    }
    guard !shuttingDown else { return }
    emit(Output(effects: router.deviceDisconnected(session.identity, now: now)), for: nil)
    apply(groups.deviceDisconnected(session.identity))
  }

  /// The session ends: here, in the cluster's presence and (unless another node resumed it) in
  /// the cluster's store.
  func discard(_ session: DeliverySession) {
    forget(session)
    remote.detached(session.identity, session: session.id, ended: true)
    shared?.end(session.id)
  }

  /// The session leaves this hub only (another socket resumes it through the cluster's store).
  func forget(_ session: DeliverySession) {
    sessions.removeValue(forKey: session.id)
    sessionTimers.removeValue(forKey: session.id)?.cancel()
    let identity = session.identity
    if devices[identity.userId]?[identity.deviceId] === session {
      devices[identity.userId]?[identity.deviceId] = nil
      if devices[identity.userId]?.isEmpty == true { devices[identity.userId] = nil }
    }
  }

  // MARK: - Messages on an open session

  func handleMessage(_ bytes: [UInt8], isText: Bool, session: DeliverySession) {
    guard isText else {
      session.deliver(.error(.init(code: .badRequest, message: "binary frames are not part of the protocol")))
      return
    }
    let received = ContinuousClock.now
    let frame: ClientEnvelope
    do {
      frame = try MessageCodec.decodeClientMessage(bytes)
    } catch {
      observations.metrics.messagesReceived.labels("invalid").increment()
      observations.metrics.messagesRefused.labels(error.code.rawValue).increment()
      session.deliver(error.serverMessage)
      return
    }
    let message = frame.message
    observations.metrics.messagesReceived.labels(message.type.rawValue).increment()
    switch message {
    case .ack(let ack):
      session.acknowledge(upTo: ack.seq)
      return
    default:
      break
    }
    guard let requestID = frame.id else { return }
    if !heldRequests.isEmpty, heldRequests.contains(Self.requestKey(session, requestID)) { return }
    if let earlier = session.reply(to: requestID) {
      session.deliver(earlier)
      return
    }
    if Self.startsACall(message), let wait = invites.take(session.identity.userId, now: clock.now) {
      // Not remembered: the same id sent again later is handled afresh.
      session.deliver(
        .error(
          .init(
            replyTo: requestID, code: .rateLimited,
            message: "more than \(Int(settings.limits.invitesPerMinute)) calls started per minute",
            callId: message.callId, retryAfterMs: wait.milliseconds)))
      return
    }
    if let callId = message.callId, !runsHere(callId) {
      let location = placement.location(of: callId)
      if location != .here {
        // Answered by the owner through `.replyArrived`; a retry meanwhile waits for that answer.
        heldRequests.insert(Self.requestKey(session, requestID))
        placement.forward(message, id: requestID, from: session.identity, session: session.id, to: location.node)
        return
      }
    }
    if case .quality(let report) = message { return takeQuality(report, id: requestID, session: session) }
    let outcome: CallRouter.Outcome
    switch message {
    case .hello:
      outcome = .init(
        reply: .error(.init(replyTo: requestID, code: .invalidState, message: "this socket already has a session")))
    case .ping:
      outcome = .init(reply: .ack(.init(replyTo: requestID)))
    default:
      outcome = route(message, id: requestID, from: session.identity)
    }
    observe(message, outcome.reply, from: session.identity)
    emit(
      Output(
        session: session, requestID: requestID, reply: outcome.reply,
        coalesced: Self.mayWait(outcome.reply, answering: message), effects: outcome.effects,
        relayedFrom: Self.isRelayed(message, outcome.reply) ? received : nil),
      for: message.callId)
  }

  /// Whether this hub runs the call (live or recently ended): only then are its requests handled
  /// here without asking the placement.
  private func runsHere(_ callId: CallID) -> Bool {
    router.calls[callId] != nil || groups.knows(callId)
  }

  /// A request another node forwarded: handled like one of this node's devices', except that the
  /// answer, once the journal has it, goes back to the node it came from.
  private func handleForwarded(_ request: ForwardedRequest) {
    if let callId = request.message.callId, !runsHere(callId), placement.isBeingTakenOver(callId) {
      // The lease is won, the journal being read: the request is handled once the call runs here.
      guard awaitingTakeOver[callId, default: []].count < Self.maxAwaitingTakeOver else {
        return answerForwarded(
          .error(
            .init(
              replyTo: request.id, code: .internal, message: "the call is being taken over; try again", callId: callId)),
          request)
      }
      if awaitingTakeOver[callId] == nil {
        // Should the take-over never report back (Redis failed in the middle), the requests go
        // on after a while all the same, and get whatever answer this node has.
        _ = clock.schedule(after: TakeOver.wait) { [self] in
          deliver(.adopt([], connected: [], then: nil, attempted: [callId]))
        }
      }
      awaitingTakeOver[callId, default: []].append(request)
      return
    }
    if case .quality(let report) = request.message {
      return takeQuality(report, id: request.id, from: request.from, answer: .forwarded(request))
    }
    switch forwardedAnswers.arrive(request) {
    case .new: break
    case .inFlight: return
    case .answered(let reply): return answerForwarded(reply, request)
    }
    let outcome = route(request.message, id: request.id, from: request.from)
    observe(request.message, outcome.reply, from: request.from)
    emit(
      Output(forwarded: request, requestID: request.id, reply: outcome.reply, effects: outcome.effects),
      for: request.message.callId)
  }

  /// The metrics of a handled message: refusals by code, and how fast a callee device rang.
  private func observe(_ message: ClientMessage, _ reply: ServerMessage, from who: Identity) {
    guard case .ack = reply else {
      if case .error(let error) = reply { observations.metrics.messagesRefused.labels(error.code.rawValue).increment() }
      return
    }
    if case .ringing(let m) = message, let call = router.callState(m.callId, visibleTo: who) {
      observations.calleeRang(after: Double(clock.now.millisecondsSince1970 - call.createdAt) / 1000)
    }
  }

  /// Negotiation the router passes on to the other side as it is.
  private static func isRelayed(_ message: ClientMessage, _ reply: ServerMessage) -> Bool {
    guard case .ack = reply else { return false }
    switch message {
    case .offer, .answer, .candidate, .endOfCandidates, .iceRestartRequest, .mediaState: return true
    default: return false
    }
  }

  /// A quality report: checked against the call here, stored off the hub's thread, answered
  /// once it is on disk (a retry meanwhile is not answered twice).
  /// Where the answer to a quality report goes: the reporting session here, or the node that
  /// forwarded it (the call runs here).
  private enum QualityAnswer: Sendable {
    case session(String)
    case forwarded(ForwardedRequest)
  }

  private func takeQuality(_ report: QualityReport, id: String, session: DeliverySession) {
    takeQuality(report, id: id, from: session.identity, answer: .session(session.id))
  }

  private func takeQuality(_ report: QualityReport, id: String, from who: Identity, answer: QualityAnswer) {
    guard let call = router.callState(report.callId, visibleTo: who) else {
      let reply = ServerMessage.error(
        .init(
          replyTo: id, code: .notFound,
          message: "no call \(report.callId) of yours is in progress or ended in the last 10 minutes",
          callId: report.callId))
      observations.metrics.messagesRefused.labels(ErrorCode.notFound.rawValue).increment()
      return answerQuality(reply, requestID: id, answer)
    }
    let stored = StoredQualityReport(
      userId: who.userId, deviceId: who.deviceId, role: call.callerId == who.userId ? "caller" : "callee",
      receivedAt: clock.now.millisecondsSince1970, report: report)
    if case .session(let sessionID) = answer { heldRequests.insert(sessionID + "\u{0}" + id) }
    let (quality, observations, log) = (quality, observations, log)
    Task {
      let reply: ServerMessage
      do {
        switch try await quality.recordQuality(
          callId: report.callId, stored, maxDevicesPerCall: QualityReportLimits.devicesPerCall)
        {
        case .stored:
          observations.qualityStored(stored)
          reply = .ack(.init(replyTo: id, callId: report.callId))
        case .finalAlreadyStored:
          reply = .error(
            .init(
              replyTo: id, code: .invalidState, message: "this device already sent its final report for the call",
              callId: report.callId))
        case .tooManyDevices:
          reply = .error(
            .init(
              replyTo: id, code: .limitExceeded,
              message: "at most \(QualityReportLimits.devicesPerCall) devices report on one call",
              callId: report.callId))
        }
      } catch {
        log.error("cannot store a quality report for call \(report.callId): \(error)", callId: report.callId)
        reply = .error(
          .init(
            replyTo: id, code: .internal, message: "the report could not be stored; try again", callId: report.callId))
      }
      if case .error(let error) = reply { observations.metrics.messagesRefused.labels(error.code.rawValue).increment() }
      self.answerQuality(reply, requestID: id, answer)
    }
  }

  private func answerQuality(_ reply: ServerMessage, requestID: String, _ answer: QualityAnswer) {
    switch answer {
    case .session(let sessionID): handle(.replyArrived(sessionID: sessionID, requestID: requestID, reply: reply))
    case .forwarded(let request): placement.reply(reply, to: request)
    }
  }

  /// Sends an outcome's reply and applies its effects, once its journal writes (and those of the
  /// call's outcomes before it) are on disk: an acknowledged change survives kill -9.
  private func emit(_ output: Output, for callId: CallID?) {
    var changes: [LiveCallChange] = []
    for case .persist(let change) in output.effects { changes.append(change) }
    let ticket = changes.isEmpty ? nil : journal.submit(changes)
    guard let callId, let wait = ticket ?? (held.isEmpty ? nil : held.pendingTicket(of: callId)) else {
      return release(output)
    }
    var output = output
    output.wasHeld = true
    held.hold(output, for: callId, until: wait)
    if let session = output.session, let id = output.requestID { heldRequests.insert(Self.requestKey(session, id)) }
  }

  private func release(_ output: Output) {
    if let session = output.session, let reply = output.reply, let id = output.requestID {
      if output.wasHeld { heldRequests.remove(Self.requestKey(session, id)) }
      session.answer(reply, to: id, coalesced: output.coalesced)
    } else if let request = output.forwarded, let reply = output.reply {
      let repeats = forwardedAnswers.answered(request, reply)
      answerForwarded(reply, request)
      for repeated in repeats { answerForwarded(reply, repeated) }
    }
    apply(output.effects)
    for case .persist(let change) in output.effects {
      switch change {
      case .ended(let record, _, _): placement.finished(record.callId)
      case .groupEnded(let record, _): placement.finished(record.callId)
      default: break
      }
    }
    if let arrived = output.relayedFrom {
      let elapsed = ContinuousClock.now - arrived
      observations.metrics.relayLatency.observe(
        Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
  }

  /// A request of a session here that the placement found runs here is answered as any other
  /// (before its effects); another node's goes back there.
  private func answerForwarded(_ reply: ServerMessage, _ request: ForwardedRequest) {
    if request.origin.node == placement.thisNode {
      replyArrived(reply, sessionID: request.origin.sessionID, requestID: request.id)
    } else {
      placement.reply(reply, to: request)
    }
  }

  private static func requestKey(_ session: DeliverySession, _ requestID: String) -> String {
    session.id + "\u{0}" + requestID
  }

  /// Group messages go to the group router, the rest to the 1:1 router; a call id names one call
  /// of either kind, never both.
  private func route(_ message: ClientMessage, id: String, from who: Identity) -> CallRouter.Outcome {
    let now = clock.now
    guard message.type.isGroupCall else {
      // An id the router no longer holds is checked against the history (pruned first, so that
      // the router cannot take a call it is about to forget for a new one).
      guard case .invite(let invite) = message else {
        let outcome = router.handle(message, id: id, from: who, now: now)
        if case .accept(let accept) = message, case .ack = outcome.reply { placement.answered(accept.callId) }
        return outcome
      }
      router.pruneEnded(now: now)
      if router.calls[invite.callId] == nil {
        if groups.knows(invite.callId) {
          return refusal(id, .conflict, "callId is already used by another call", callId: invite.callId)
        }
        if let refused = refuseUsedCallId(invite.callId, id: id) { return refused }
      }
      let outcome = router.handle(message, id: id, from: who, now: now, blocked: blocks.blocks(invite.to, who.userId))
      if case .ack = outcome.reply, router.calls[invite.callId]?.isEnded == false {
        placement.running(invite.callId, users: [who.userId, invite.to])
      }
      return outcome
    }
    guard sfu != nil else {
      return refusal(
        id, .invalidState, "group calls are not enabled on this server (it has no SFU configured)",
        callId: message.callId)
    }
    let newCallId: CallID?
    switch message {
    case .groupCreate(let m): newCallId = m.callId
    case .roomJoin(let m): newCallId = m.callId
    default: newCallId = nil
    }
    if let newCallId, router.calls[newCallId] != nil {
      return refusal(id, .conflict, "callId is already used by another call", callId: newCallId)
    }
    if let newCallId, !groups.knows(newCallId), let refused = refuseUsedCallId(newCallId, id: id) { return refused }
    let blocks = blocks
    var outcome = groups.handle(message, id: id, from: who, now: now) { blocks.blocks($0, who.userId) }
    switch (message, outcome.reply) {
    case (.groupOffer, _), (.groupAnswer, _), (.groupCandidate, _), (.groupEndOfCandidates, _), (_, .error):
      break  // negotiation, or refused: nothing the history keeps changed
    default:
      if let callId = message.callId { outcome.effects = persistingGroup(outcome.effects, callId) }
    }
    return outcome
  }

  /// What a group call's outcome leaves on disk: the record the call would leave if the server
  /// stopped now (group calls do not outlive a restart: it is completed on start), or its final
  /// record once it ended.
  private func persistingGroup(_ effects: [CallEffect], _ callId: CallID) -> [CallEffect] {
    var persisted = effects
    let silenced = groups.silencedMembers(of: callId)
    for case .external(.groupEnded(let record)) in effects {
      persisted.append(.persist(.groupEnded(record, silenced: silenced)))
    }
    if let live = groups.recordIfInterrupted(callId, now: clock.now) {
      persisted.append(.persist(.groupLive(live, silenced: silenced)))
    }
    return persisted
  }

  /// Call ids are unique for ever: one that any call ever had (in the history, even long after
  /// it left memory) is refused.
  private func refuseUsedCallId(_ callId: CallID, id: String) -> CallRouter.Outcome? {
    do {
      guard try liveCalls.isCallIdUsed(callId) else { return nil }
      return refusal(id, .conflict, "callId was already used by another call", callId: callId)
    } catch {
      log.error("cannot look call id \(callId) up: \(error)", callId: callId)
      return refusal(id, .internal, "cannot check the call id now; try again", callId: callId)
    }
  }

  private func refusal(_ id: String, _ code: ErrorCode, _ text: String, callId: CallID?) -> CallRouter.Outcome {
    .init(reply: .error(.init(replyTo: id, code: code, message: text, callId: callId)))
  }

  private func handleSFU(_ event: SFUEvent) {
    switch event {
    case .send(let message, let callId, let who):
      // Results for a device that has left meanwhile are stale.
      guard groups.isJoined(who, in: callId) else { return }
      deliver(message, toDevice: who.deviceId, of: who.userId)
    case .callFailed(let callId, let reason):
      log.error("group call \(callId): media failed: \(reason)", callId: callId)
      emit(Output(effects: persistingGroup(groups.mediaFailed(callId, now: clock.now), callId)), for: callId)
    case .participantLeft(let callId, let who):
      let effects = groups.participantLeftMedia(callId, who, now: clock.now)
      emit(Output(effects: persistingGroup(effects, callId)), for: callId)
    case .participantJoined(let callId, let who):
      guard !groups.isJoined(who, in: callId) else { return }
      log.warning(
        "group call \(callId): \(who.userId)/\(who.deviceId) entered the media room without being in the call: removed",
        callId: callId)
      sfu?.perform(.leave(callId: callId, participant: who))
    case .roomFinished(let callId):
      emit(Output(effects: persistingGroup(groups.roomFinished(callId, now: clock.now), callId)), for: callId)
    }
  }

  /// Trickled candidates come in bursts from both peers, and nobody waits for their acks: those
  /// acks may ride with the next message to the sender (typically the peer's next candidate)
  /// instead of costing a write of their own. Errors and every other answer leave at once.
  private static func mayWait(_ reply: ServerMessage, answering request: ClientMessage) -> Bool {
    guard case .ack = reply else { return false }
    switch request {
    case .candidate, .endOfCandidates, .groupCandidate, .groupEndOfCandidates: return true
    default: return false
    }
  }

  // MARK: - Effects

  private func apply(_ effects: [CallEffect]) {
    for effect in effects {
      switch effect {
      case .send(let message, let recipient):
        switch recipient {
        case .device(let userId, let deviceId):
          deliver(message, toDevice: deviceId, of: userId)
        case .user(let userId, let exceptDevice):
          if let shared {
            shared.deliver(message, to: userId, device: nil, skipping: exceptDevice.map { [$0] } ?? [])
            break
          }
          let sessions = devices[userId] ?? [:]
          guard !sessions.isEmpty else { break }
          let excluded = exceptDevice.map { sessions[$0] == nil ? 0 : 1 } ?? 0
          if sessions.count - excluded == 1 {
            // The usual case, one device: encoding it straight away saves the template's copy.
            for (deviceId, session) in sessions where deviceId != exceptDevice { session.deliver(message) }
          } else {
            // Encoded once for all of the user's devices; each copy only gets its own seq.
            let frame = ServerFrame(message)
            for (deviceId, session) in sessions where deviceId != exceptDevice { session.deliver(frame) }
          }
        }
      case .schedule(let timer, let delay):
        callTimers[timer]?.cancel()
        callTimers[timer] = clock.schedule(after: delay) { [self] in deliver(.callTimer(timer)) }
      case .cancel(let timer):
        callTimers.removeValue(forKey: timer)?.cancel()
      case .external(let event):
        remote.dispatch(event, connectedHere: connectedDeviceIDs(of: event.userId), to: effectSink)
      case .sfu(let command):
        sfu?.perform(command)
      case .persist:
        break  // written by `emit` before these effects were applied
      }
    }
  }

  /// A device's session here, or wherever else in the cluster it has one.
  private func deliver(_ message: ServerMessage, toDevice deviceId: String, of userId: String) {
    if let shared {
      shared.deliver(message, to: userId, device: deviceId, skipping: [])
    } else {
      devices[userId]?[deviceId]?.deliver(message)
    }
  }

  /// The user's devices with a live socket here: the ones a push would wake for nothing (with
  /// those on other nodes, which `remote` adds).
  private func connectedDeviceIDs(of userId: String) -> Set<String> {
    Set((devices[userId] ?? [:]).values.filter(\.isConnected).map(\.identity.deviceId))
  }
}
