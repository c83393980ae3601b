import DialtoneNet
import DialtoneProtocol
import DialtoneSessions
import DialtoneSupport
import Foundation

/// Sessions kept in a cluster's store (`SharedSessions`): a hello waits for its session to be
/// opened or resumed there before its welcome, and every sequenced message comes back from the
/// store numbered, to be written in seq order. A single server never comes here (`shared` nil).
extension SignalingHub {
  /// How long a session waits for a message missing before the ones it holds, before it reads
  /// the store again.
  static let gapWait = Duration.seconds(1)

  /// Asks the store for the hello's session; the welcome goes out when it answers
  /// (`sessionOpened`). A session of the device here gives way to the new one, or is resumed
  /// through the store like one held by any other node.
  func openShared(
    _ hello: ClientMessage.Hello, id helloID: String, identity: Identity, existing: DeliverySession?,
    socket: SocketState, _ shared: any SharedSessions
  ) {
    if let existing {
      if existing.id == hello.resume?.sessionId { forget(existing) } else { discard(existing) }
    }
    socket.helloTimer = nil
    socket.opening = true
    let opening = SessionOpening(
      socketID: socket.connection.id, identity: identity, helloID: helloID, features: hello.features,
      freshID: Self.newSessionID(), resume: hello.resume)
    openingFrames[opening.freshID] = []
    if let resume = hello.resume { openingFrames[resume.sessionId] = [] }
    shared.open(opening)
  }

  /// A message sent before the welcome: handled once the session is open.
  func holdUntilWelcome(_ bytes: [UInt8], isText: Bool, socket: SocketState) {
    guard socket.early.count < Self.maxEarlyMessages else {
      socket.connection.close(
        code: UInt16(CloseCode.overLimit.rawValue),
        reason: "more than \(Self.maxEarlyMessages) messages before the welcome")
      return
    }
    socket.early.append((bytes, isText))
  }

  func sessionOpened(_ opening: SessionOpening, _ outcome: SessionOpened) {
    let identity = opening.identity
    var early = openingFrames.removeValue(forKey: opening.freshID) ?? []
    if let resume = opening.resume { early += openingFrames.removeValue(forKey: resume.sessionId) ?? [] }
    let state = sockets[opening.socketID]
    state?.opening = false
    let now = clock.now
    let session: DeliverySession
    let pending: [StoredFrame]
    let resync: Bool
    switch outcome {
    case .failed(let reason):
      guard let state else { return }
      state.connection.send(
        text: MessageCodec.encode(.error(.init(replyTo: opening.helloID, code: .internal, message: reason)), seq: nil))
      state.connection.close(code: UInt16(CloseCode.tryAgainLater.rawValue), reason: reason)
      return
    case .fresh(let sessionID, let wasResync):
      session = newSharedSession(sessionID, identity, lastSeq: 0, now)
      (pending, resync) = ([], wasResync)
    case .resumed(let sessionID, let stored, let replies):
      session = newSharedSession(sessionID, identity, lastSeq: opening.resume?.lastSeq ?? 0, now)
      for (id, reply) in replies { session.remember(reply, for: id) }
      (pending, resync) = (stored, false)
    }
    let resumed = opening.resume?.sessionId == session.id
    // The newest hello of a device wins, as on a single server.
    if let other = devices[identity.userId]?[identity.deviceId] {
      if let old = other.socket, old !== state?.connection {
        sockets[old.id]?.session = nil
        old.close(code: UInt16(CloseCode.replaced.rawValue), reason: "replaced by a newer connection of this device")
      }
      if other.id == session.id { forget(other) } else { discard(other) }
    }
    sessions[session.id] = session
    devices[identity.userId, default: [:]][identity.deviceId] = session
    emit(deviceConnected: identity, newSession: !resumed, now: now)
    guard let state, !shuttingDown else {
      // The socket closed before its welcome: the session waits for a resume like any other.
      state?.connection.close(code: UInt16(CloseCode.goingAway.rawValue), reason: "this server is shutting down")
      return detach(session)
    }
    state.session = session
    session.attach(state.connection, now: now)
    session.sendUnsequenced(
      .welcome(
        welcome(
          replyTo: opening.helloID, session: session.id, identity, resumed: resumed, resync: resync,
          features: opening.features, now: now)))
    log.debug(
      "\(resumed ? "resumed" : "new") session \(session.id) for \(identity.userId)/\(identity.deviceId)",
      sessionId: session.id)
    stored(pending + early.filter { $0.sessionID == session.id })
    let held = state.early
    state.early = []
    for message in held where state.session === session {
      handleMessage(message.bytes, isText: message.isText, session: session)
    }
  }

  private func newSharedSession(_ id: String, _ identity: Identity, lastSeq: UInt64, _ now: Date) -> DeliverySession {
    DeliverySession(
      id: id, identity: identity, socket: nil, now: now, maxUnackedBytes: settings.limits.maxUnackedBytes,
      sent: observations.metrics.messagesSent, shared: shared, lastSeq: lastSeq)
  }

  /// Writes frames the store numbered to their sessions' sockets, in seq order per session.
  func stored(_ frames: [StoredFrame]) {
    for frame in frames {
      guard let session = sessions[frame.sessionID] else {
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
        let id = session.id
        _ = clock.schedule(after: Self.gapWait) { [self] in deliver(.gapCheck(sessionID: id)) }
      }
    }
  }

  /// A gap that the letters did not fill in time: the store is read again from it.
  func checkGap(_ sessionID: String) {
    guard let session = sessions[sessionID] else { return }
    session.gapCheckPending = false
    guard session.hasGap, session.isConnected else { return }
    log.info(
      "session \(sessionID) waits for message \(session.lastSentSeq + 1): reading it again", sessionId: sessionID)
    shared?.fetch(sessionID, after: session.lastSentSeq)
    session.gapCheckPending = true
    _ = clock.schedule(after: Self.gapWait) { [self] in deliver(.gapCheck(sessionID: sessionID)) }
  }

  /// The session cannot go on writing in order: its socket closes and the client reconnects,
  /// resuming what the store still has or resyncing.
  func breakSession(_ sessionID: String) {
    guard let socket = sessions[sessionID]?.socket else { return }
    socket.close(
      code: UInt16(CloseCode.tryAgainLater.rawValue), reason: "this session missed messages: reconnect and resume")
  }
}
