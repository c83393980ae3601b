import DialtoneCalls
import DialtoneCluster
import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// The gateway between sockets and calls: every event of the server passes here, in order, and
/// goes to the part that owns it (`HubParts`: sockets, sessions, requests, outcomes, effects).
/// An actor on the network thread (`NetworkExecutor`): socket events are handled synchronously,
/// with no thread hop; timers and reports from other threads hop in through the executor.
/// Nothing here blocks: what needs a store runs elsewhere and comes back as an event.
public actor SignalingHub {
  typealias Settings = HubParts.Settings

  let settings: Settings
  let clock: any DialtoneClock
  let log: Log
  private let desk: CallDesk
  private let gate: SocketGate
  private let registry: SessionRegistry
  private let sessions: SessionHost
  private let requests: RequestPipeline
  private let outcomes: OutcomeGate
  private let effects: EffectApplier
  private let placement: any CallPlacement
  private let store: (any SessionStore)?
  private let observations: Observations
  private let mailbox: HubMailbox

  nonisolated let executor: NetworkExecutor
  /// Whether plain relayed candidates take the relay's fast lane (`RequestPipeline.fastLane`).
  nonisolated let takesRelayFastLane: Bool
  public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

  init(_ parts: HubParts, executor: NetworkExecutor) {
    settings = parts.settings
    clock = parts.clock
    log = parts.log
    desk = parts.desk
    gate = parts.gate
    registry = parts.registry
    sessions = parts.sessions
    requests = parts.requests
    outcomes = parts.outcomes
    effects = parts.effects
    placement = parts.placement
    store = parts.store
    observations = parts.observations
    mailbox = parts.mailbox
    self.executor = executor
    takesRelayFastLane = parts.requests.fastLane
    parts.mailbox.attach(self)
  }

  nonisolated var socketHandler: any WebSocketHandler { SocketEventBridge(hub: self) }

  /// Takes an event from any thread: synchronously when already on the hub's executor (socket
  /// events), otherwise posted to it, in order, to be taken there the same way (timers off the
  /// loop, the journal's commits, look-up answers): a plain action on the executor's queue, not
  /// a `Task` (an allocation, a job and an async frame for each of ~350 commits a second).
  nonisolated func deliver(_ event: HubEvent) {
    if executor.isCurrent {
      // What `assumeIsolated` does (the executor was checked just above), without its closure
      // over the event, which cost two allocations per socket message (the closure's context
      // made escaping for the cast). This closure captures nothing: a thin function, cast the
      // same way, from isolated to plain (an `isolated` parameter does not change how it is called).
      let run: (isolated SignalingHub, HubEvent) -> Void = { hub, event in hub.handle(event) }
      unsafeBitCast(run, to: ((SignalingHub, HubEvent) -> Void).self)(self, event)
    } else {
      executor.post { self.deliver(event) }
    }
  }

  // MARK: - Events

  func handle(_ event: HubEvent) {
    defer { store?.flush() }
    let now = clock.now
    switch event {
    case .opened(let connection, let request):
      let opened = gate.open(connection, request, now: now) {
        _ = mailbox.post(.helloDeadlines, after: $0, on: clock)
      }
      if opened { observations.metrics.socketsOpened.increment() }
    case .received(let connection, let bytes, let isText):
      guard let state = gate[connection.id] else { return }
      guard gate.admit(bytes, isText: isText, state, now: now) else { return }
      if let session = state.session {
        requests.handle(bytes, isText: isText, session: session)
      } else if state.opening {
        gate.holdUntilWelcome(bytes, isText: isText, state)
      } else if let (opening, outcome) = sessions.hello(bytes, isText: isText, state) {
        opened(opening, outcome)
      }
    case .closed(let connection, _):
      guard let state = gate.close(connection), let session = state.session, session.socket === connection else {
        return
      }
      detach(session)
    case .helloDeadlines:
      let (expired, next) = gate.helloDeadlinesPassed(now: now)
      for state in expired {
        state.connection.close(
          code: UInt16(CloseCode.helloTimeout.rawValue), reason: "no hello within \(gate.helloTimeoutSeconds) s")
      }
      if let next { _ = mailbox.post(.helloDeadlines, after: next, on: clock) }
    case .sessionExpiry(let sessionID):
      sessions.expired(sessionID)
    case .callTimer(let timer):
      effects.fired(timer)
      outcomes.emit(Output(effects: desk.timerFired(timer, now: now)), for: timer.callId)
    case .sfu(let event):
      handle(event, now: now)
    case .journalCommitted(let ticket):
      outcomes.committed(upTo: ticket)
    case .callIdChecked(let callId, let history):
      requests.checked(callId, history)
    case .replyArrived(let sessionID, let requestID, let reply):
      outcomes.arrived(reply, sessionID, requestID)
    case .forwarded(let request):
      requests.handle(request)
    case .forwardedAnswered(let request, let reply):
      outcomes.answer(request, with: reply)
    case .takeOverWaited(let callId):
      placement.takenOver([callId])
      requests.takenOver([callId])
    case .cluster(let event):
      handle(event, now: now)
    case .gapCheck(let sessionID):
      sessions.checkGap(sessionID)
    }
  }

  private func handle(_ event: SFUEvent, now: Date) {
    switch event {
    case .send(let message, let callId, let who):
      // Results for a device that has left meanwhile are stale.
      guard desk.isJoined(who, in: callId) else { return }
      effects.deliver(message, toDevice: who.deviceId, of: who.userId)
    case .callFailed(let callId, let reason):
      log.error("group call \(callId): media failed: \(reason)", callId: callId)
      outcomes.emit(Output(effects: desk.mediaFailed(callId, now: now)), for: callId)
    case .participantLeft(let callId, let who):
      outcomes.emit(Output(effects: desk.participantLeftMedia(callId, who, now: now)), for: callId)
    case .participantJoined(let callId, let who):
      let removal = desk.participantEnteredMedia(callId, who)
      if !removal.isEmpty {
        log.warning(
          "group call \(callId): \(who.userId)/\(who.deviceId) entered the media room without being in the call: removed",
          callId: callId)
      }
      effects.apply(removal)
    case .roomFinished(let callId):
      outcomes.emit(Output(effects: desk.roomFinished(callId, now: now)), for: callId)
    }
  }

  private func handle(_ event: ClusterEvent, now: Date) {
    switch event {
    case .letters(let letters):
      for letter in letters { handle(letter, now: now) }
    case .forwarded(let request):
      requests.handle(request)
    case .replyArrived(let sessionID, let requestID, let reply):
      outcomes.arrived(reply, sessionID, requestID)
    case .adopt(let stored, let groups, let ended, let connected, let request, let attempted):
      adopt(stored, ended: ended)
      adoptGroups(groups)
      for identity in connected { handle(.device(identity, connected: true, newSession: false), now: now) }
      placement.takenOver(attempted)
      requests.takenOver(attempted.sorted())
      if let request { requests.handle(request) }
    case .relinquish(let callIds):
      let kept = Set(callIds).subtracting(relinquish(callIds))
      // Writes of theirs are still on their way to the journal: they go once those are done.
      if !kept.isEmpty { _ = mailbox.post(.cluster(.relinquish(kept.sorted())), after: .milliseconds(100), on: clock) }
    case .sessionOpened(let opening, let outcome):
      opened(opening, outcome)
    case .framesStored(let frames):
      sessions.stored(frames)
    case .sessionsBroken(let sessionIDs):
      for id in sessionIDs { sessions.breakSession(id) }
    case .requestsRefused(let requests):
      for request in requests { sessions.refused(request.requestID, of: request.sessionID) }
    case .forwardedDropped(let requests):
      for request in requests { outcomes.forgetForwarded(request.sessionID, request.requestID) }
    case .answersUnstored(let answers):
      for answer in answers { sessions.answeredUnstored(answer.bytes, to: answer.session) }
    case .deliveryFailed(let userId):
      sessions.breakSessions(of: userId)
    case .stateLost:
      gate.closeAll(code: .tryAgainLater, reason: "the cluster lost its sessions: reconnect and resync")
    }
  }

  private func handle(_ letter: ClusterLetter, now: Date) {
    switch letter {
    case .frame(let sessionID, let seq, let bytes):
      sessions.stored([StoredFrame(sessionID: sessionID, seq: seq, bytes: bytes)])
    case .broken(let sessionID):
      sessions.breakSession(sessionID)
    case .request(let request):
      requests.handle(request)
    case .reply(let sessionID, let requestID, let reply):
      // The answering node stored it in the session already: it is only remembered here.
      outcomes.remembered(reply, sessionID, requestID)
    case .unstoredReply(let sessionID, let requestID, let bytes):
      // The answering node sent it once the copies its request caused were stored.
      outcomes.arrivedUnstored(sessionID, requestID)
      sessions.answeredUnstored(bytes, to: sessionID)
    case .device(let identity, let connected, let newSession):
      let changes =
        connected
        ? desk.deviceConnected(identity, newSession: newSession, now: now) : desk.deviceDisconnected(identity, now: now)
      outcomes.emit(Output(effects: changes), for: nil)
    case .replaced(let identity, let sessionID):
      sessions.replacedElsewhere(identity, sessionID: sessionID)
    }
  }

  // MARK: - Sessions

  private func opened(_ opening: SessionOpening, _ outcome: SessionOpened) {
    switch sessions.opened(opening, outcome) {
    case .failed:
      return
    case .orphaned(let session, let newSession):
      deviceConnected(session.identity, newSession: newSession)
      detach(session)
    case .welcomed(let session, let newSession, let early):
      deviceConnected(session.identity, newSession: newSession)
      for message in early where gate[opening.socketID]?.session === session {
        requests.handle(message.bytes, isText: message.isText, session: session)
      }
    }
  }

  /// The calls of a device that has a socket again learn it (a new session is rung again).
  private func deviceConnected(_ identity: Identity, newSession: Bool) {
    outcomes.emit(Output(effects: desk.deviceConnected(identity, newSession: newSession, now: clock.now)), for: nil)
  }

  private func detach(_ session: any DeliverySession) {
    sessions.detach(session)
    guard !sessions.shuttingDown else { return }
    outcomes.emit(Output(effects: desk.deviceDisconnected(session.identity, now: clock.now)), for: nil)
  }
}

// MARK: - Operations: the HTTP API, restarts, handing calls between nodes, stopping

extension SignalingHub {
  func liveDevices(of userId: String) -> [(deviceId: String, connectedAt: Date)] { registry.liveDevices(of: userId) }

  func callState(_ callId: CallID, for who: Identity) -> CallState? { desk.callState(callId, visibleTo: who) }
  func groupState(_ callId: CallID, for who: Identity) -> GroupCallState? { desk.groupState(callId, visibleTo: who) }

  /// Fills the block table from the store (at start, before any socket opens).
  func loadBlocks(_ pairs: [(userId: String, blockedId: String)]) { desk.loadBlocks(pairs) }

  /// A block made or lifted through `/v1/blocks`, once it is stored: every later invite obeys it.
  func setBlock(_ userId: String, blocks other: String, _ on: Bool) { desk.setBlock(userId, blocks: other, on) }

  /// Sets the metrics' gauges from the hub's state (before a scrape).
  func refreshGauges() {
    let metrics = observations.metrics
    metrics.socketsOpen.set(gate.count)
    let connected = registry.connectedCount
    metrics.sessionsConnected.set(connected)
    metrics.sessionsResumable.set(registry.count - connected)
    metrics.callsLive.set(desk.router.liveCalls.count)
    metrics.groupCallsLive.set(desk.groups.liveCallCount)
    store?.refreshGauges()
  }

  /// What the admin dashboard shows live: sockets, sessions and the calls in progress.
  func liveOverview() -> (sockets: Int, sessions: Int, calls: [CallState], groupCalls: Int) {
    (gate.count, registry.count, desk.router.liveCalls, desk.groups.liveCallCount)
  }

  /// Carries on with the calls that were live when the server stopped (before any socket opens).
  func restore(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall]) {
    defer { store?.flush() }
    outcomes.emit(Output(effects: desk.restore(stored, ended: ended, now: clock.now)), for: nil)
    if !stored.isEmpty { log.info("restored \(stored.count) call(s) in progress") }
  }

  /// Takes over live calls another node handed over or lost, as read from the shared journal:
  /// carried on exactly as after a restart (deadlines kept, devices given the restart grace),
  /// and their devices sent what they may have missed while no node ran them (a session that had
  /// a message already, from the call's former node, is not given the copy: `OnceKey`).
  func adopt(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall] = []) {
    outcomes.emit(Output(effects: desk.restore(stored, ended: ended, now: clock.now)), for: nil)
    effects.apply(desk.catchUp(stored.map(\.snapshot.callId)).filter { if case .send = $0 { true } else { false } })
  }

  /// Takes over live group calls another node ran (it died or drained), as read from the shared
  /// journal: nobody is rung again, and the call's SFU room is made again here, every device in
  /// the call joining it afresh (it publishes and subscribes again without leaving: protocol.md
  /// 20.11).
  func adoptGroups(_ stored: [StoredGroupCall]) {
    guard !stored.isEmpty else { return }
    outcomes.emit(Output(effects: desk.adoptGroups(stored, now: clock.now)), for: nil)
  }

  /// Hands calls over to another node (a draining node's, in a cluster): each leaves this
  /// hub as it is, its timers here cancelled, once every journal write of it is on disk (a call
  /// with writes pending stays until then). Returns the calls handed over.
  func relinquish(_ callIds: [CallID]) -> [CallID] {
    var handedOver: [CallID] = []
    for callId in callIds where !outcomes.holds(callId) {
      let released = desk.relinquish(callId)
      guard !released.isEmpty else { continue }
      effects.apply(released)
      handedOver.append(callId)
    }
    return handedOver
  }

  /// From now on no session starts here, and sockets closed by the shutdown leave their calls
  /// as they are (no grace starts), so that the restarted server carries on with them.
  func prepareForShutdown() { sessions.shuttingDown = true }

  /// Returns once every event delivered before the call has been handled (the executor runs
  /// them in order), and what they stored is flushed.
  func drained() { store?.flush() }
}
