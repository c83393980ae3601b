import DialtoneCalls
import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneSessions
import DialtoneSupport
import Foundation

/// Opens, resumes, detaches and ends device sessions, on one path whatever keeps them: a hello
/// is read (`Handshake`), its session opened (at once on one server, `LocalSessions`; when the
/// cluster's store answers, `SessionStore.open`), then welcomed; the newest socket of a device
/// wins. In a cluster it also writes what the store numbered (`stored`), in seq order.
final class SessionHost {
  private let gate: SocketGate
  private let registry: SessionRegistry
  private let store: (any SessionStore)?
  private let remote: any RemoteDevices
  private let handshake: Handshake
  private let clock: any DialtoneClock
  private let mailbox: HubMailbox
  private let resumeWindow: Duration
  private let limits: ServerLimits
  private let sent: Counter
  private let log: Log
  /// Set when the server begins to stop: no new session starts, and sockets closed by the
  /// shutdown leave their calls as they are (no grace starts) for the restarted server.
  var shuttingDown = false
  /// Frames for sessions being opened here, held for their welcome.
  private var openingFrames: [String: [StoredFrame]] = [:]
  /// How long a session waits for a message missing before the ones it holds before it reads
  /// the store again.
  static let gapWait = Duration.seconds(1)

  init(
    gate: SocketGate, registry: SessionRegistry, store: (any SessionStore)?, remote: any RemoteDevices,
    handshake: Handshake, clock: any DialtoneClock, mailbox: HubMailbox, resumeWindow: Duration, limits: ServerLimits,
    sent: Counter, log: Log
  ) {
    self.gate = gate
    self.registry = registry
    self.store = store
    self.remote = remote
    self.handshake = handshake
    self.clock = clock
    self.mailbox = mailbox
    self.resumeWindow = resumeWindow
    self.limits = limits
    self.sent = sent
    self.log = log
  }

  // MARK: - Opening

  /// A socket's first message. Returns the opening when it is decided now (one server); in a
  /// cluster the store's answer comes later (`.cluster(.sessionOpened)`).
  func hello(_ bytes: [UInt8], isText: Bool, _ socket: SocketState) -> (SessionOpening, SessionOpened)? {
    let connection = socket.connection
    guard !shuttingDown else {
      // A session started now would end with the process (and, in a cluster, could register the
      // device on this node after its next socket registered it on another).
      connection.close(code: UInt16(CloseCode.goingAway.rawValue), reason: "this server is shutting down")
      return nil
    }
    let hello: ClientMessage.Hello
    let helloID: String
    let identity: Identity
    switch handshake.read(bytes, isText: isText, headerToken: socket.headerToken) {
    case .refused(let error, let code):
      connection.send(text: MessageCodec.encode(.error(error), seq: nil))
      connection.close(code: UInt16(code.rawValue), reason: error.message)
      return nil
    case .accepted(let h, let id, let who):
      (hello, helloID, identity) = (h, id, who)
    }
    let existing = registry.session(of: identity)
    if existing == nil, registry.deviceCount(of: identity.userId) >= limits.maxDevicesPerUser {
      let message =
        "at most \(limits.maxDevicesPerUser) devices per user are signed in at once (including sessions resumable after a drop)"
      connection.send(
        text: MessageCodec.encode(.error(.init(replyTo: helloID, code: .limitExceeded, message: message)), seq: nil))
      connection.close(code: UInt16(CloseCode.overLimit.rawValue), reason: message)
      return nil
    }
    socket.helloAccepted = true
    if let existing, let old = existing.socket, old !== connection { replace(old) }
    let opening = SessionOpening(
      socketID: connection.id, identity: identity, helloID: helloID, features: hello.features,
      freshID: Handshake.newSessionID(), resume: hello.resume)
    guard let store else { return (opening, LocalSessions.open(opening, existing: existing)) }
    if let existing {
      // Resumed through the store like a session any other node held, or given up for a new one.
      if existing.id == hello.resume?.sessionId { registry.remove(existing) } else { discard(existing) }
    }
    socket.opening = true
    openingFrames[opening.freshID] = []
    if let resume = hello.resume { openingFrames[resume.sessionId] = [] }
    store.open(opening)
    return nil
  }

  /// What an opening came to.
  enum Opened {
    case failed
    /// Welcomed: the device's calls learn it is back (`newSession`: rung again), then what the
    /// client sent before the welcome is handled.
    case welcomed(any DeliverySession, newSession: Bool, early: [(bytes: [UInt8], isText: Bool)])
    /// Opened while its socket closed (or the server began stopping): it waits for a resume.
    case orphaned(any DeliverySession, newSession: Bool)
  }

  func opened(_ opening: SessionOpening, _ outcome: SessionOpened) -> Opened {
    let identity = opening.identity
    var early = openingFrames.removeValue(forKey: opening.freshID) ?? []
    if let resume = opening.resume { early += openingFrames.removeValue(forKey: resume.sessionId) ?? [] }
    let state = gate[opening.socketID]
    state?.opening = false
    let now = clock.now
    let session: any DeliverySession
    let pending: [StoredFrame]
    let resync: Bool
    switch outcome {
    case .failed(let reason):
      if let state {
        state.connection.send(
          text: MessageCodec.encode(.error(.init(replyTo: opening.helloID, code: .internal, message: reason)), seq: nil)
        )
        state.connection.close(code: UInt16(CloseCode.tryAgainLater.rawValue), reason: reason)
      }
      return .failed
    case .fresh(let sessionID, let wasResync):
      session = makeSession(sessionID, identity, lastSeq: 0, now)
      (pending, resync) = ([], wasResync)
    case .resumed(let sessionID, let stored, let replies):
      if store == nil, let local = registry.session(sessionID) {
        session = local  // one server: the same session, with the messages it kept
      } else {
        session = makeSession(sessionID, identity, lastSeq: opening.resume?.lastSeq ?? 0, now)
        for (id, reply) in replies { session.remember(reply, for: id) }
      }
      (pending, resync) = (stored, false)
    }
    let resumed = opening.resume?.sessionId == session.id
    // The newest hello of a device wins.
    if let other = registry.session(of: identity), other !== session {
      if let old = other.socket, old !== state?.connection { replace(old) }
      if other.id == session.id { registry.remove(other) } else { discard(other) }
    }
    registry.add(session)
    guard let state, !shuttingDown else {
      // The socket closed before its welcome: the session waits for a resume like any other.
      state?.connection.close(code: UInt16(CloseCode.goingAway.rawValue), reason: "this server is shutting down")
      return .orphaned(session, newSession: !resumed)
    }
    state.session = session
    let welcome = handshake.welcome(
      replyTo: opening.helloID, session: session.id, identity, resumed: resumed, resync: resync,
      features: opening.features, now: now)
    if let local = session as? LocalSession, resumed {
      local.attach(state.connection, now: now)
      local.sendUnsequenced(welcome)
      local.resume(on: state.connection, lastSeq: opening.resume?.lastSeq ?? 0, now: now)
    } else {
      session.attach(state.connection, now: now)
      session.sendUnsequenced(welcome)
    }
    log.debug(
      "\(resumed ? "resumed" : "new") session \(session.id) for \(identity.userId)/\(identity.deviceId)",
      sessionId: session.id)
    stored(pending + early.filter { $0.sessionID == session.id })
    let held = state.early
    state.early = []
    return .welcomed(session, newSession: !resumed, early: held)
  }

  private func makeSession(_ id: String, _ identity: Identity, lastSeq: UInt64, _ now: Date) -> any DeliverySession {
    guard let store else {
      return LocalSession(
        id: id, identity: identity, socket: nil, now: now, maxUnackedBytes: limits.maxUnackedBytes, sent: sent)
    }
    return SharedSession(id: id, identity: identity, store: store, now: now, lastSeq: lastSeq, sent: sent)
  }

  /// Same device connected twice: the newest socket wins; the old one must not reconnect.
  private func replace(_ old: any SessionSocket) {
    gate[old.id]?.session = nil
    old.close(code: UInt16(CloseCode.replaced.rawValue), reason: "replaced by a newer connection of this device")
  }

  // MARK: - Closing

  /// The session's socket closed: it waits for a resume until its window passes.
  func detach(_ session: any DeliverySession) {
    session.detach(now: clock.now)
    remote.detached(session.identity, session: session.id, ended: false)
    let id = session.id
    registry.expire(session, after: resumeWindow, on: clock) { [mailbox] in mailbox.post(.sessionExpiry(sessionID: id))
    }
  }

  /// The resume window passed: the session ends unless a socket came back.
  func expired(_ sessionID: String) {
    registry.expired(sessionID)
    guard let session = registry.session(sessionID), !session.isConnected else { return }
    discard(session)
  }

  /// The session ends: here, in the cluster's presence and (unless another node resumed it) in
  /// the cluster's store.
  func discard(_ session: any DeliverySession) {
    registry.remove(session)
    remote.detached(session.identity, session: session.id, ended: true)
    store?.end(session.id)
  }

  /// Another node resumed the session: it closes here, without ending it.
  func replacedElsewhere(_ identity: Identity, sessionID: String) {
    guard let session = registry.session(sessionID), session.identity == identity else { return }
    log.debug("\(identity.userId)/\(identity.deviceId): \(sessionID) replaced on another node", sessionId: sessionID)
    if let socket = session.socket { replace(socket) }
    discard(session)
  }

  // MARK: - Sessions kept in the cluster's store

  /// Writes frames the store numbered to their sessions' sockets, in seq order per session.
  func stored(_ frames: [StoredFrame]) {
    for frame in frames {
      guard let session = registry.session(frame.sessionID) as? SharedSession else {
        if openingFrames[frame.sessionID] != nil, openingFrames[frame.sessionID, default: []].count < 4096 {
          openingFrames[frame.sessionID, default: []].append(frame)
        }
        continue
      }
      guard session.stored(frame) else { continue }
      if session.overflowing {
        breakSession(session.id)
      } else if !session.gapCheckPending {
        session.gapCheckPending = true
        _ = mailbox.post(.gapCheck(sessionID: session.id), after: Self.gapWait, on: clock)
      }
    }
  }

  /// A request the cluster's write-behind holder refused whole (too much waits for Redis):
  /// nothing it caused was sent, so its answer is `rate-limited`, without a `seq` (not stored:
  /// the session's own frames may be what is over its bound), and the answer remembered for it
  /// is forgotten, so that the same id sent again is handled afresh (protocol.md §15).
  func refused(_ requestID: String, of sessionID: String) {
    guard let session = registry.session(sessionID) else { return }
    session.forget(requestID)
    session.sendUnsequenced(
      .error(
        .init(
          replyTo: requestID, code: .rateLimited, message: "too much is waiting for the cluster's store",
          retryAfterMs: Self.storeBacklogWait)))
  }

  /// The answer to a relayed candidate, written without a seq by the cluster's write-behind
  /// holder once its copies are stored (this node's, or the call's node's when the candidate was
  /// forwarded there: `ClusterLetter.unstoredReply`): not remembered (the candidate sent again is handled
  /// afresh), and lost with the socket (the client sends the candidate again after its resume).
  func answeredUnstored(_ bytes: [UInt8], to sessionID: String) {
    registry.session(sessionID)?.socket?.sendCoalesced(text: bytes)
  }

  /// How long a client waits before sending a refused request again: a few of Redis's batches.
  static let storeBacklogWait: Int64 = 500

  /// A gap that the letters did not fill in time: the store is read again from it.
  func checkGap(_ sessionID: String) {
    guard let session = registry.session(sessionID) as? SharedSession else { return }
    session.gapCheckPending = false
    guard session.hasGap, session.isConnected else { return }
    log.info(
      "session \(sessionID) waits for message \(session.lastSentSeq + 1): reading it again", sessionId: sessionID)
    store?.fetch(sessionID, after: session.lastSentSeq)
    session.gapCheckPending = true
    _ = mailbox.post(.gapCheck(sessionID: sessionID), after: Self.gapWait, on: clock)
  }

  /// The session cannot go on writing in order: its socket closes and the client reconnects,
  /// resuming what the store still has or resyncing.
  func breakSession(_ sessionID: String) {
    registry.session(sessionID)?.socket?.close(
      code: UInt16(CloseCode.tryAgainLater.rawValue), reason: "this session missed messages: reconnect and resume")
  }

  /// Every session of the user here breaks (a message for them could not be stored).
  func breakSessions(of userId: String) {
    for (_, session) in registry.sessions(of: userId) { breakSession(session.id) }
  }
}
