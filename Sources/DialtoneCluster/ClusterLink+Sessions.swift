import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import Synchronization

/// The cluster's `SessionStore`: every device session lives in Redis (`SessionLedger`), so a
/// client whose node died or drained resumes on any other node with nothing lost or duplicated.
/// Every step runs on the link's one sender thread, in the hub's order, after the presence and
/// call steps the hub asked for before it.
///
/// A message that cannot be stored (Redis failed) would leave a hole nobody sees: its session
/// is closed at once (`sessionsBroken`, or `deliveryFailed` for a user's sessions) and made
/// unresumable as soon as Redis answers (`SessionPoison`), so the client resyncs.
extension ClusterLink: SessionStore {
  package func ledger(_ connection: any RedisClient) -> SessionLedger {
    SessionLedger(
      connection,
      limits: .init(
        capacity: settings.maxUnackedMessages, maxBytes: settings.maxUnackedBytes, expiry: settings.sessionExpiry,
        inboxCapacity: settings.inboxCapacity, inboxExpiry: settings.inboxExpiry))
  }

  package func open(_ opening: SessionOpening) {
    let queued = enqueue { [self] connection in
      let outcome: SessionOpened
      if let connection {
        do {
          outcome = try openNow(opening, connection)
        } catch {
          log.error("cannot open a session for \(opening.identity.userId)/\(opening.identity.deviceId): \(error)")
          outcome = .failed("the cluster's Redis failed; try again")
        }
      } else {
        outcome = .failed("the cluster's Redis cannot be reached; try again")
      }
      inbox.current?.receive(.sessionOpened(opening, outcome))
    }
    if !queued { inbox.current?.receive(.sessionOpened(opening, .failed("this node is overloaded; try again"))) }
  }

  private func openNow(_ opening: SessionOpening, _ connection: any RedisClient) throws(RedisError) -> SessionOpened {
    try healPoisoned(connection)
    let ledger = ledger(connection)
    let who = opening.identity
    var resync = false
    if let resume = opening.resume, let writeBehind {
      switch try resumeHolding(resume, who, writeBehind, ledger) {
      case .resumed(let sessionID, let pending, let replies):
        held.withLock { _ = $0.insert(sessionID) }
        try announceNow(who, session: sessionID, connected: true, newSession: false, connection)
        return .resumed(sessionID: sessionID, pending: pending, replies: replies)
      case .failed(let why):
        return .failed(why)
      default:
        resync = true
      }
    } else if let resume = opening.resume {
      let asked = resume.sessionId
      switch try ledger.resume(asked, userId: who.userId, deviceId: who.deviceId, from: resume.lastSeq, node: thisNode)
      {
      case .resumed(_, _, let pending, let replies):
        held.withLock { _ = $0.insert(asked) }
        try announceNow(who, session: asked, connected: true, newSession: false, connection)
        return .resumed(
          sessionID: asked, pending: pending.map { StoredFrame(sessionID: $0.sessionID, seq: $0.seq, bytes: $0.bytes) },
          replies: Self.decode(replies))
      case .resync:
        // The device's own session, which nothing can resume any more: gone now, not at expiry.
        resync = true
        held.withLock { _ = $0.remove(asked) }
        try ledger.end(asked, heldBy: thisNode)
      case .gone:
        resync = true
      }
    }
    let epoch = try ledger.open(opening.freshID, userId: who.userId, deviceId: who.deviceId, node: thisNode)
    if let writeBehind, try !claim(opening.freshID, who, epoch: epoch, writeBehind, connection) {
      return .failed("this node's lease lapsed; try again")
    }
    held.withLock { _ = $0.insert(opening.freshID) }
    try announceNow(who, session: opening.freshID, connected: true, newSession: true, connection)
    return .fresh(sessionID: opening.freshID, resync: resync)
  }

  /// Write-behind: resumes the session and holds it here with the letters its previous holder had
  /// not stored (`SessionLedger.resumeHolding`). `.fresh` stands for a session to open afresh
  /// (the one asked for cannot go on, and is ended if it is this device's).
  private func resumeHolding(
    _ resume: ClientMessage.Resume, _ who: Identity, _ shell: WriteBehindShell, _ ledger: SessionLedger
  ) throws(RedisError) -> SessionOpened {
    let asked = resume.sessionId
    // A write-behind holder that died may have written its client candidates it had not
    // stored: up to its per-session bound of them.
    // (A quarter of the capacity: the holder's `maxSessionFrames`, and the skip of
    // `SessionLedger`'s append step when a holder's inbox is full.)
    let ahead = UInt64(settings.maxUnackedMessages / 4)
    // From the script to the hold the inbox is not trimmed past what its reader had read before:
    // the copies of the letters the script adds are kept from the hold on by the holding (or, the
    // lease lapsed, as retained letters).
    return try shell.resuming { () throws(RedisError) -> SessionOpened in
      switch try ledger.resumeHolding(
        asked, userId: who.userId, deviceId: who.deviceId, from: resume.lastSeq, node: thisNode,
        allowingAhead: ahead, logged: shell.logStore != nil)
      {
      case .resumed(var resumed):
        if let logStore = shell.logStore {
          // The node log: the session is taken from the logs that hold it, re-stored here, and
          // the replay decided from the takes (`WriteBehindLogStore.resume`).
          switch try logStore.resume(
            asked, resumed, client: resume.lastSeq, ahead: ahead, capacity: settings.maxUnackedMessages, ledger: ledger)
          {
          case .resumed(let taken): resumed = taken
          case .resync:
            held.withLock { _ = $0.remove(asked) }
            try ledger.end(asked, heldBy: thisNode)
            return .fresh(sessionID: asked, resync: true)
          case .superseded: return .failed("the session was resumed elsewhere meanwhile; try again")
          }
        }
        let letters = zip(resumed.letters, resumed.positions).map { Self.outgoing($0).arrived(at: $1) }
        guard
          shell.hold(
            asked, of: who, epoch: resumed.epoch, lastSeq: resumed.lastSeq, onces: resumed.onces,
            lettersAfter: resumed.lettersAfter, letters: letters, letterOrigins: resumed.origins,
            storedRequests: Set(resumed.replies.keys))
        else {
          // This node's lease lapsed: the letters stay where the script copied them, the first
          // after the session's `lp` in this node's inbox, where its next resume reads them before
          // any that arrived since.
          return .failed("this node's lease lapsed; try again")
        }
        return .resumed(
          sessionID: asked,
          pending: resumed.pending.map { StoredFrame(sessionID: $0.sessionID, seq: $0.seq, bytes: $0.bytes) },
          replies: Self.decode(resumed.replies))
      case .resync:
        held.withLock { _ = $0.remove(asked) }
        try ledger.end(asked, heldBy: thisNode)
        return .fresh(sessionID: asked, resync: true)
      case .gone:
        return .fresh(sessionID: asked, resync: true)
      }
    }
  }

  /// Write-behind: marks the session as numbered here and holds it from the last seq Redis has.
  /// False when it is another's already or this node may not hold sessions now.
  private func claim(
    _ session: String, _ who: Identity, epoch: UInt64, _ shell: WriteBehindShell, _ connection: any RedisClient
  ) throws(RedisError) -> Bool {
    guard let claimed = try WriteBehindStore(connection, limits: ledger(connection).limits).claim(session, epoch: epoch)
    else { return false }
    return shell.hold(session, of: who, epoch: epoch, lastSeq: claimed.lastSeq, onces: claimed.onces)
  }

  /// Remembered answers as the hub replays them (each is sent again with a new seq).
  private static func decode(_ replies: [String: [UInt8]]) -> [String: ServerMessage] {
    var decoded: [String: ServerMessage] = [:]
    for (id, bytes) in replies {
      if let message = try? MessageCodec.decodeServerMessage(bytes).message { decoded[id] = message }
    }
    return decoded
  }

  /// Write-behind: the node's bound (`WriteBehindShell.admit`); store-first stores each step as
  /// it comes, with nothing held for Redis here.
  package func admit(_ requestID: String, of sessionID: String, bytes: Int) -> Bool {
    writeBehind?.admit(requestID, of: sessionID, bytes: bytes) ?? true
  }

  package func append(_ message: ServerMessage, to sessionID: String, answering requestID: String?, coalesced: Bool) {
    asked()
    // Encoded once, for whichever path takes it.
    let (frame, once) = (Self.frame(message), OnceKey.of(message))
    if let writeBehind,
      writeBehind.addIfHeld(
        Self.outgoing(frame, of: message, to: sessionID, answering: requestID, mayWait: coalesced, once: once))
    {
      return
    }
    let step = SessionLedger.Step.append(frame, session: sessionID, requestID: requestID, once: once)
    batch.withLock { $0.append(PendingStep(step: step, coalesced: coalesced, what: message.typeName)) }
  }

  /// Write-behind: the ack to a relayed candidate of a session held here is written without a
  /// seq once its copies are stored, and never stored (`WriteBehindHolder.UnstoredAnswer`): one
  /// session entry per relayed candidate instead of two. Store-first stores it as any answer.
  package func answerUnstored(_ reply: ServerMessage, to sessionID: String, answering requestID: String) -> Bool {
    guard let writeBehind,
      writeBehind.answerIfHeld(
        .init(session: sessionID, requestID: requestID, bytes: MessageCodec.encode(reply, seq: nil)))
    else { return false }
    asked()
    return true
  }

  package func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>) {
    asked()
    var skipping = skipping
    // Encoded once for every copy (every copy is the same frame and key).
    let (frame, once) = (Self.frame(message), OnceKey.of(message))
    if let writeBehind {
      // The sessions held here are numbered here; Redis delivers to the others.
      let here = writeBehind.sessions(of: userId, device: device, skipping: skipping)
      for (heldDevice, session) in here {
        writeBehind.add(Self.outgoing(frame, of: message, to: session, answering: nil, mayWait: false, once: once))
        skipping.insert(heldDevice)
      }
      if let device, skipping.contains(device) { return }
    }
    let step = SessionLedger.Step.deliver(frame, user: userId, device: device, skipping: skipping, once: once)
    batch.withLock { $0.append(PendingStep(step: step, what: message.typeName)) }
  }

  /// Held for housekeeping (`PendingAcknowledgements`: why that is safe and what it saves),
  /// unless too many sessions wait: then they join the hub's next transaction.
  package func acknowledge(_ sessionID: String, through seq: UInt64) {
    // A session whose frames are in the node's log: its acknowledgement trims the log instead.
    if let writeBehind, writeBehind.acknowledged(sessionID, through: seq) { return }
    guard acknowledgements.note(sessionID, through: seq) else { return }
    asked()
    let steps = acknowledgements.take().map {
      PendingStep(step: .acknowledge(session: $0.session, through: $0.through), what: "ack")
    }
    batch.withLock { $0 += steps }
  }

  /// Stores the acknowledgements held since the last time (housekeeping, every heartbeat, and
  /// on leaving); those that fail wait for the next time. Then the node's log is trimmed of
  /// what its clients acknowledged (write-behind with `logStripes`: one trim per stripe).
  package func storeAcknowledgements(_ connection: any RedisClient) throws(RedisError) {
    let pending = acknowledgements.take()
    if !pending.isEmpty {
      do {
        try ledger(connection).acknowledge(pending)
      } catch {
        acknowledgements.restore(pending)
        throw error
      }
    }
    try writeBehind?.trimLog(connection)
  }

  /// The answer to a request another node forwarded goes into the requesting session itself, in
  /// the same transaction as what the request caused (the effects the hub applies next), so that
  /// neither lands without the other; the requesting node is told it came, for its bookkeeping.
  /// Write-behind: what the request caused for sessions held here is stored by this node's holder
  /// later, so the answer waits for it (`flush`).
  package func reply(_ reply: ServerMessage, to request: ForwardedRequest) {
    asked()
    let letter = ClusterLetterCodec.encode(.reply(sessionID: request.origin.sessionID, requestID: request.id, reply))
    let frame = Self.frame(reply)
    if let writeBehind,
      writeBehind.addIfHeld(
        Self.outgoing(frame, of: reply, to: request.origin.sessionID, answering: request.id, mayWait: false, once: nil))
    {
      batch.withLock { $0.append(PendingStep(step: .letter(letter, to: request.origin.node), what: "answer letter")) }
      return
    }
    let stored = SessionLedger.Step.append(frame, session: request.origin.sessionID, requestID: request.id, once: nil)
    let steps = [
      PendingStep(step: stored, what: reply.typeName),
      PendingStep(step: .letter(letter, to: request.origin.node), what: "answer letter"),
    ]
    guard writeBehind != nil else { return batch.withLock { $0 += steps } }
    deferReply(steps, to: request)
  }

  /// Write-behind: the ack to a relayed candidate another node forwarded goes back as a letter
  /// without a seq (`ClusterLetter.unstoredReply`), neither stored in the requester's session nor
  /// remembered there, and only once the copies the candidate caused here are stored: it waits
  /// as any forwarded answer does (`flush`), for the holder's batch of the copies for sessions
  /// held here, or behind the event's steps that leave copies in other nodes' inboxes. A
  /// requester held here now (it resumed here meanwhile) is answered as this node's own.
  package func replyUnstored(_ reply: ServerMessage, to request: ForwardedRequest) {
    asked()
    guard let writeBehind else { return self.reply(reply, to: request) }
    let (session, bytes) = (request.origin.sessionID, MessageCodec.encode(reply, seq: nil))
    if writeBehind.answerIfHeld(.init(session: session, requestID: request.id, bytes: bytes)) { return }
    let letter = ClusterLetterCodec.encode(.unstoredReply(sessionID: session, requestID: request.id, bytes: bytes))
    deferReply(
      [PendingStep(step: .letter(letter, to: request.origin.node), what: "unstored answer letter")], to: request)
  }

  package var repliesUnstored: Bool { writeBehind != nil }

  /// The hub asked for something the next `flush` takes (before it is added: the hub asks and
  /// flushes on its one thread).
  private func asked() { askedSinceFlush.store(true, ordering: .releasing) }

  /// Write-behind: the steps answering a forwarded request wait for what it caused here to be
  /// stored (`flush`).
  private func deferReply(_ steps: [PendingStep], to request: ForwardedRequest) {
    forwardedReplies.withLock {
      $0.steps += steps
      $0.requests.append(RefusedRequest(sessionID: request.origin.sessionID, requestID: request.id))
    }
  }

  /// Stores everything the hub asked for since the last flush, as one transaction in one round
  /// trip (the hub flushes after each event it handles).
  package func flush() {
    guard askedSinceFlush.exchange(false, ordering: .acquiring) else { return }
    var steps = batch.withLock { batch in
      defer { batch.removeAll(keepingCapacity: true) }
      return batch
    }
    // Write-behind: answers to forwarded requests wait for the holder's batch of what their event
    // caused for sessions held here, if it caused any (`WriteBehindShell.flush(replies:)`); else
    // they go with the event's other steps.
    var waiting: WriteBehindShell.ForwardedReplies?
    if let writeBehind {
      let replies = forwardedReplies.withLock { replies in
        defer { replies = ([], []) }
        return replies
      }
      if !replies.steps.isEmpty {
        if writeBehind.defersReplies(to: replies.requests) {
          waiting = .init(requests: replies.requests) { [weak self] in self?.send(replies.steps, joining: false) }
        } else {
          steps += replies.steps
        }
      }
    }
    // Write-behind frames go after the steps of the same event: a batch is queued behind them on
    // the sender, so an answer is never stored (nor written) before what its request caused.
    defer { writeBehind?.flush(replies: waiting) }
    guard !steps.isEmpty else { return }
    send(steps, joining: true)
  }

  /// Stores steps as one transaction on the sender. `joining`: they may join the steps flushed
  /// before, if those still wait (`StepBatch`); an answer that waited for a write-behind batch may
  /// not, since the batch it waited for (and the frames of sessions lost here) is behind those.
  private func send(_ steps: [PendingStep], joining: Bool) {
    if joining, let waiting = currentBatch.current, waiting.add(steps) { return }
    let group = StepBatch(steps)
    currentBatch.withLock {
      $0?.close()
      $0 = group
    }
    let queued = sender.submit { [self] connection in
      let steps = group.take()
      var results: [SessionLedger.StepResult]
      do throws(RedisError) {
        guard let connection else { throw RedisError.connectionFailed(message: "not connected") }
        try healPoisoned(connection)
        results = try ledger(connection).run(steps.map { $0.step }, from: thisNode)
        metrics.transactions.increment()
        metrics.steps.increment(by: Double(steps.count))
      } catch {
        results = Array(repeating: .failed(error), count: steps.count)
      }
      settle(steps, results)
    }
    if !queued {
      let steps = group.take()
      settle(steps, Array(repeating: .failed(.invalidRequest("too much is waiting for Redis")), count: steps.count))
    }
  }

  /// Hands the frames stored for sessions held here to the hub; a message that could not be
  /// stored breaks the sessions it was for.
  private func settle(_ steps: [PendingStep], _ results: [SessionLedger.StepResult]) {
    var here: [StoredFrame] = []
    for (pending, result) in zip(steps, results) {
      switch (pending.step, result) {
      case (_, .appended(.here(let stored))):
        here.append(
          StoredFrame(sessionID: stored.sessionID, seq: stored.seq, bytes: stored.bytes, coalesced: pending.coalesced))
      case (_, .delivered(let stored, _)):
        here += stored.map { StoredFrame(sessionID: $0.sessionID, seq: $0.seq, bytes: $0.bytes) }
      case (.append(_, let session, _, _), .failed(let error)):
        lost(pending.what, sessionID: session, error)
      case (.deliver(_, let user, _, _, _), .failed(let error)):
        lost(pending.what, userId: user, error)
      default:
        break  // an ack or a letter: losing one costs time, not a message
      }
    }
    if !here.isEmpty { inbox.current?.receive(.framesStored(here)) }
  }

  /// A message for a session that could not be stored: that session resyncs.
  private func lost(_ what: String, sessionID: String, _ error: RedisError) {
    guard !stopped.current else { return }
    metrics.storeFailures.increment()
    log.error(
      "a \(what) for session \(sessionID) could not be stored (\(error)): its client will resync", sessionId: sessionID)
    poison.withLock { $0.add(session: sessionID) }
    inbox.current?.receive(.sessionsBroken([sessionID]))
  }

  /// A message for a user's sessions that could not be stored: all of them resync.
  private func lost(_ what: String, userId: String, _ error: RedisError) {
    guard !stopped.current else { return }
    metrics.storeFailures.increment()
    log.error("a \(what) for \(userId) could not be stored (\(error)): their devices will resync")
    poison.withLock { $0.add(user: userId) }
    inbox.current?.receive(.deliveryFailed(userId: userId))
  }

  package func fetch(_ sessionID: String, after seq: UInt64) {
    let queued = enqueue { [self] connection in
      var broken = true
      if let connection {
        switch try? ledger(connection).range(sessionID, after: seq) {
        case .messages(let stored)?:
          broken = false
          inbox.current?.receive(
            .framesStored(stored.map { StoredFrame(sessionID: $0.sessionID, seq: $0.seq, bytes: $0.bytes) }))
        case .dropped?, .gone?:
          log.warning("session \(sessionID) missed messages it can no longer get", sessionId: sessionID)
        case nil: log.error("cannot read session \(sessionID) again", sessionId: sessionID)
        }
      }
      if broken { inbox.current?.receive(.sessionsBroken([sessionID])) }
    }
    if !queued { inbox.current?.receive(.sessionsBroken([sessionID])) }
  }

  package func end(_ sessionID: String) {
    held.withLock { _ = $0.remove(sessionID) }
    writeBehind?.release(sessionID)
    acknowledgements.forget(sessionID)
    submit("the end of session \(sessionID)") { [self] connection throws(RedisError) in
      try ledger(connection).end(sessionID, heldBy: thisNode)
    }
  }

  /// Makes the sessions that missed a message unresumable, and has their holders close them.
  package func healPoisoned(_ connection: any RedisClient) throws(RedisError) {
    guard !poison.current.isEmpty else { return }
    let pending = poison.withLock { $0.take() }
    if pending.overflowed > 0 {
      log.error("\(pending.overflowed) more sessions missed a message while Redis failed: they may resume past it")
    }
    do {
      let ledger = ledger(connection)
      var targets = pending.sessions
      for user in pending.users { targets.formUnion(try ledger.sessions(ofUser: user)) }
      var brokenHere: [String] = []
      let mailbox = Self.mailbox(connection, settings)
      for session in targets.sorted() {
        guard let holder = try ledger.poison(session) else { continue }
        if holder == thisNode {
          brokenHere.append(session)
        } else {
          _ = try mailbox.send(ClusterLetterCodec.encode(.broken(sessionID: session)), to: holder)
        }
      }
      if !brokenHere.isEmpty { inbox.current?.receive(.sessionsBroken(brokenHere)) }
    } catch {
      poison.withLock { $0.merge(pending) }
      throw error
    }
  }

  /// Refreshes the sessions this node holds (housekeeping, every `sessionRefresh`): those gone from
  /// Redis (expired while the node stalled, or Redis lost them) are broken here, so that their
  /// clients resync.
  package func refreshSessions(_ connection: any RedisClient) throws(RedisError) {
    let ids = held.current.sorted()
    guard !ids.isEmpty else { return }
    let ledger = ledger(connection)
    var missing: [String] = []
    for start in stride(from: 0, to: ids.count, by: 1000) {
      missing += try ledger.touch(Array(ids[start..<min(ids.count, start + 1000)]))
    }
    guard !missing.isEmpty else { return }
    held.withLock { $0.subtract(missing) }
    log.warning("\(missing.count) session(s) held here are gone from Redis: their clients will resync")
    inbox.current?.receive(.sessionsBroken(missing))
  }

  /// Whether no node may take an unowned call over now: Redis lost its state (this node saw it
  /// happen, or sees the mark changed before its housekeeping did), and the nodes that run
  /// calls may not have placed them again yet. Taking one over then would run it twice.
  package func recovering(_ connection: any RedisClient) throws(RedisError) -> Bool {
    if let until = recoveringUntil.current, ContinuousClock.now < until { return true }
    return try presence(connection).mark() != clusterMark.current
  }

  /// The cluster's gauges, before a scrape.
  package func refreshGauges() {
    metrics.sessionsHeld.set(held.current.count)
    metrics.senderQueue.set(sender.queued)
  }

  /// A message for a write-behind session: a relayed candidate (not an answer) is written at
  /// once and stored after; anything else is stored first. `mayWait`: an answer whose write may
  /// wait (`--ack-delay-ms`) may wait for the batch window too.
  package static func outgoing(
    _ message: ServerMessage, to session: String, answering requestID: String?, mayWait: Bool, once: String? = nil
  ) -> WriteBehindHolder.Outgoing {
    outgoing(frame(message), of: message, to: session, answering: requestID, mayWait: mayWait, once: once)
  }

  /// `outgoing` with the message's frame encoded already.
  static func outgoing(
    _ frame: SessionLedger.Frame, of message: ServerMessage, to session: String, answering requestID: String?,
    mayWait: Bool, once: String?
  ) -> WriteBehindHolder.Outgoing {
    let candidate: Bool
    if case .candidate = message, requestID == nil { candidate = true } else { candidate = false }
    return WriteBehindHolder.Outgoing(
      session: session, frame: frame, kind: candidate ? .candidate : .storeFirst, requestID: requestID,
      mayWait: candidate || mayWait, once: once)
  }

  /// A letter another node left unnumbered: a candidate by its type (members are written in
  /// order of their names, so `type` ends the frame, right after `seq`: the tail).
  package static func outgoing(_ letter: UnnumberedLetter) -> WriteBehindHolder.Outgoing {
    let candidate = letter.requestID == nil && letter.frame.tail.elementsEqual(candidateTail)
    return WriteBehindHolder.Outgoing(
      session: letter.session, frame: letter.frame, kind: candidate ? .candidate : .storeFirst,
      requestID: letter.requestID, once: letter.once)
  }

  private static let candidateTail = Array(#","type":"candidate"}"#.utf8)

  /// The message as the ledger numbers it.
  package static func frame(_ message: ServerMessage) -> SessionLedger.Frame {
    let (head, tail) = ServerFrame(message).splitAtSeq
    return SessionLedger.Frame(head: head, tail: tail)
  }

  /// Whether Redis still holds the cluster's state (housekeeping, every heartbeat). A Redis that
  /// restarted without it (the deployment runs it without persistence) has lost every session,
  /// presence, lease and inbox: the node then closes its sockets, so that its devices reconnect
  /// and resync, and places its calls again.
  package func checkClusterMark(_ connection: any RedisClient) throws(RedisError) {
    let presence = presence(connection)
    let known = clusterMark.current
    if let seen = try presence.mark(), seen == known { return }
    let mark = try presence.markedNow()
    clusterMark.withLock { $0 = mark }
    guard known != nil else { return }  // this node's first look
    log.warning("the cluster's Redis lost its state (restarted?): closing every socket here so that its devices resync")
    recoveringUntil.withLock { $0 = .now + settings.nodeExpiry }
    held.withLock { $0.removeAll() }
    inbox.current?.receive(.stateLost)
    try placeOwnedCallsAgain(connection)
  }
}
