import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation
import Synchronization

/// A node's part of a cluster (`--redis-url`): it answers the hub's two seams from Redis. Which
/// node holds each device's session is `ClusterPresence`; which node runs each call is a lease
/// (`CallOwnership`), taken by the node where the call starts; messages between nodes are
/// letters in each node's inbox (`NodeMailbox`).
///
/// The hub calls it on its own thread and never waits: every Redis step runs on `sender`, one
/// job at a time in the order the hub asked, so letters for one device or one call keep their
/// order. What comes back (letters read from this node's inbox, calls it takes over) reaches the
/// hub as events. Heartbeats, lease renewals and taking over the calls of nodes that died run on
/// a thread of their own (`ClusterHousekeeping`).
package final class ClusterLink: RemoteDevices, CallPlacement, LiveCallFence, Sendable {
  package struct Settings: Sendable {
    package var redis: RedisConfiguration
    /// This incarnation of the node: its name and a random suffix, so that a node restarting
    /// under the same name never mistakes the state of its previous life for its own.
    package var node: String
    package var heartbeat: Duration = .seconds(1)
    /// A node that stops beating for this long is dead: its devices and inbox stop counting.
    package var nodeExpiry: Duration = .seconds(3)
    /// How long a call's owner holds it without renewing: the longest a dead node's calls wait
    /// for another node to take their timers over (sooner when a device asks about one).
    package var lease: Duration = .seconds(10)
    package var inboxCapacity = 100_000
    package var inboxExpiry: Duration = .seconds(120)
    /// Jobs waiting for Redis; past this the hub's requests are refused (and said so).
    package var maxQueued = 50_000
    /// How long a session outlives its holder's last refresh (the resume window and some), how
    /// often the holder refreshes its sessions, and what each keeps for its resume.
    package var sessionExpiry: Duration = .seconds(90)
    package var sessionRefresh: Duration = .seconds(10)
    package var maxUnackedMessages = 1024
    package var maxUnackedBytes = 1 << 20
    /// How long the router keeps an ended call (a node taking one over reads it back as ended).
    package var endedRetention: Duration = .seconds(600)
    /// Store-first (Redis numbers every message) or write-behind (this node numbers its own).
    package var sessions: ClusterSessionMode = .storeFirst
    /// Write-behind only: how long before its heartbeat lapses (`nodeExpiry`) a holder stops
    /// writing, and how long frames that may wait are held for a fuller batch.
    package var leaseMargin: Duration = .seconds(1)
    package var batchWindow: Duration = .zero
    /// Write-behind only: how many stripes the node's own log has (`WriteBehindLogStore`); 0: no
    /// log, each batch is stored in its sessions' keys (`WriteBehindStore`). Every node must count
    /// the same. A resume reads it; incomplete where Redis numbers a session past a full inbox (docs/deploy.md).
    package var logStripes = 0

    package init(
      redis: RedisConfiguration, node: String, heartbeat: Duration = .seconds(1), nodeExpiry: Duration = .seconds(3),
      lease: Duration = .seconds(10), inboxCapacity: Int = 100_000, inboxExpiry: Duration = .seconds(120),
      maxQueued: Int = 50_000, sessionExpiry: Duration = .seconds(90), sessionRefresh: Duration = .seconds(10),
      maxUnackedMessages: Int = 1024, maxUnackedBytes: Int = 1 << 20, endedRetention: Duration = .seconds(600)
    ) {
      self.redis = redis
      self.node = node
      self.heartbeat = heartbeat
      self.nodeExpiry = nodeExpiry
      self.lease = lease
      self.inboxCapacity = inboxCapacity
      self.inboxExpiry = inboxExpiry
      self.maxQueued = maxQueued
      self.sessionExpiry = sessionExpiry
      self.sessionRefresh = sessionRefresh
      self.maxUnackedMessages = maxUnackedMessages
      self.maxUnackedBytes = maxUnackedBytes
      self.endedRetention = endedRetention
    }
  }

  package let settings: Settings
  package var thisNode: String { settings.node }
  package let sender: RedisWorker
  package let inbox = Locked<(any ClusterInbox)?>(nil)
  /// The sessions this node holds, refreshed in Redis while it does (`ClusterLink+Sessions`).
  package let held = Locked<Set<String>>([])
  /// Sessions and users whose messages could not be stored, to be made unresumable once Redis
  /// answers again (bounded: `SessionPoison`).
  package let poison = Locked(SessionPoison())
  /// What this node last read of the cluster's mark: a different one means Redis lost its state.
  package let clusterMark = Locked<String?>(nil)
  /// Until when this node holds back from taking unowned calls over after Redis lost its state:
  /// every live node places its own calls again within a heartbeat of noticing.
  package let recoveringUntil = Locked<ContinuousClock.Instant?>(nil)
  /// Write-behind mode's driver of the sessions held here (nil: store-first).
  package let writeBehind: WriteBehindShell?
  /// Calls whose lease this node is winning and whose journal it is reading (`beginTakeOver`).
  private let adopting = Locked<[CallID: ContinuousClock.Instant]>([:])
  /// Clients' acknowledgements, stored by housekeeping (`PendingAcknowledgements`).
  package let acknowledgements = PendingAcknowledgements()
  /// Session steps the hub asked for since its last `flush`, run as one transaction then.
  package let batch = Locked<[PendingStep]>([])
  /// Whether the hub asked for anything `flush` takes since its last one (a step, an answer to a
  /// forwarded request, a frame or an answer for the holder): an event that asked for nothing (a
  /// ping, an acknowledgement held for housekeeping) is flushed without taking a lock.
  let askedSinceFlush = Atomic<Bool>(false)
  /// Whether the next `flush` has anything to take (tests).
  package var asksPending: Bool { askedSinceFlush.load(ordering: .relaxed) }
  /// Write-behind: the answers to forwarded requests the hub gave since its last `flush`, with
  /// their requesters; they may wait for what their requests caused here to be stored (`flush`).
  package let forwardedReplies = Locked<(steps: [PendingStep], requests: [RefusedRequest])>(([], []))
  /// The flushed steps waiting for the sender, which later flushes join (`StepBatch`).
  package let currentBatch = Locked<StepBatch?>(nil)

  /// Queues a job that is not a batch of session steps: the waiting batch takes no more steps,
  /// so that none overtakes this job.
  @discardableResult
  package func enqueue(_ job: @escaping RedisWorker.Job) -> Bool {
    currentBatch.withLock {
      $0?.close()
      $0 = nil
    }
    return sender.submit(job)
  }

  package struct PendingStep: Sendable {
    package let step: SessionLedger.Step
    /// For a frame stored for a session here: whether its write may wait to share one.
    package var coalesced = false
    /// The message's type, for the log.
    package let what: String
  }
  /// The calls this node runs, with their users (their lists in Redis name the call).
  private let owned = Locked<[CallID: [String]]>([:])
  /// This node's epoch of each call it took over (`LiveCallStore.takeOver`); a call placed here
  /// is at 1. The journal writes a call with it, so that once a later owner takes the call over
  /// (a higher epoch) nothing this node still writes of it lands. Kept for `epochRetention`
  /// after the call ends here, for its last writes (the journal may retry them that long).
  private let epochs = Locked<[CallID: (epoch: Int64, endedAt: ContinuousClock.Instant?)]>([:])
  package static let epochRetention = Duration.seconds(60)
  private let liveCalls: any LiveCallStore
  package let metrics: ClusterMetrics
  package let log: Log
  private let reader: ClusterInboxReader
  private let housekeeping: ClusterHousekeeping
  /// Set by `stop`: what the hub still reports while it shuts down is no longer the cluster's.
  package let stopped = Locked(false)
  /// The calls this node runs that are connected (their users are busy for other nodes).
  private let talking = Locked<Set<CallID>>([])
  /// Requests sent to another node and not answered yet (`retryUnanswered`).
  private let unanswered = Locked(
    AwaitedAnswers(wait: ClusterLink.answerWait, maxAttempts: ClusterLink.maxAttempts, capacity: 100_000))

  /// How long a forwarded request waits for its answer before it is routed again (longer than
  /// a node takes to count as dead), and how often.
  package static let answerWait = Duration.seconds(4)
  package static let maxAttempts = 3

  /// `now`: the monotonic clock write-behind's lease counts by (tests inject theirs).
  package init(
    settings: Settings, liveCalls: any LiveCallStore, metrics: ClusterMetrics, log: Log,
    now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
  ) {
    var settings = settings
    if settings.redis.replicaWait.observer == nil {
      settings.redis.replicaWait.observer = metrics.replicaObserver()
    }
    self.settings = settings
    self.liveCalls = liveCalls
    self.metrics = metrics
    self.log = log
    let redis = settings.redis
    sender = RedisWorker(name: "cluster-sender", maxQueued: settings.maxQueued) { () throws(RedisError) in
      let connection = try redis.open()
      try connection.load(SessionLedger.scripts + WriteBehindStore.scripts + WriteBehindLog.scripts)
      return connection
    }
    if settings.sessions == .writeBehind {
      writeBehind = WriteBehindShell(
        node: settings.node,
        holder: .init(
          lease: settings.nodeExpiry, margin: settings.leaseMargin, maxSessionFrames: settings.maxUnackedMessages / 4,
          maxSessionBytes: settings.maxUnackedBytes / 4, batchWindow: settings.batchWindow),
        ledger: .init(
          capacity: settings.maxUnackedMessages, maxBytes: settings.maxUnackedBytes, expiry: settings.sessionExpiry,
          inboxCapacity: settings.inboxCapacity, inboxExpiry: settings.inboxExpiry),
        sender: sender, inbox: inbox, poison: poison, log: log.scoped("write-behind"), now: now,
        onBatch: { [batches = metrics.batches, frames = metrics.batchFrames] cut, count in
          batches.labels(cut.rawValue).increment()
          frames.increment(by: Double(count))
        },
        onAnswersOverBound: { [dropped = metrics.answersOverBound] count in dropped.increment(by: Double(count)) },
        logStore: settings.logStripes > 0
          ? WriteBehindLogStore(node: settings.node, stripes: settings.logStripes, expiry: settings.sessionExpiry)
          : nil)
    } else {
      writeBehind = nil
    }
    reader = ClusterInboxReader(settings: settings, log: log)
    housekeeping = ClusterHousekeeping(settings: settings, log: log)
  }

  /// Starts the cluster threads: this node beats, reads its inbox and takes over orphaned calls
  /// from now on. The first heartbeat is written before this returns (a Redis that cannot be
  /// reached is a startup error).
  package func start(delivering inbox: any ClusterInbox) throws(RedisError) {
    self.inbox.withLock { $0 = inbox }
    if writeBehind != nil, settings.redis.clusterSeeds != nil {
      throw .invalidRequest("write-behind sessions need one Redis: a Redis Cluster's layout is not built")
    }
    let connection = try settings.redis.open()
    defer { connection.close() }
    try checkClusterMark(connection)
    let joining = ContinuousClock.now
    try presence(connection).heartbeat(thisNode)
    // Before the reader hands it letters: its lease counts from this heartbeat.
    writeBehind?.start(checkingEvery: settings.heartbeat / 2, joinedAt: joining)
    var unnumbered: (@Sendable ([(UnnumberedLetter, position: String)]) -> Void)?
    var mayRead: (@Sendable () -> Bool)?
    var trimPoint: (@Sendable (String, any RedisClient) throws(RedisError) -> String?)?
    if let shell = writeBehind {
      unnumbered = { letters in shell.letters(letters.map { (ClusterLink.outgoing($0.0), $0.position) }) }
      mayRead = { shell.acceptsLetters }
      trimPoint = { read, connection throws(RedisError) in try shell.trimPoint(read: read, connection) }
    }
    reader.start(
      { [weak self] letters in self?.arrived(letters) }, unnumbered: unnumbered, mayRead: mayRead,
      trimPoint: trimPoint)
    housekeeping.start(self)
  }

  /// Stops reading this node's inbox (the first step of leaving): requests other nodes send
  /// from now on wait there until they are routed again to whoever takes the calls over.
  package func stopReading() { reader.stop() }

  /// Leaves the cluster at once, once the journal has everything (`DialtoneServer.stop`): the
  /// leases of its calls are released, so the first request about one, or the next scan, has
  /// another node take it over from the journal with its deadlines, and its devices stop
  /// counting as this node's.
  package func stop() {
    stopped.withLock { $0 = true }
    reader.stop()
    housekeeping.stop()
    writeBehind?.stop()
    let node = thisNode
    let settings = settings
    let handedOver = owned.withLock { calls in
      defer { calls.removeAll() }
      return Array(calls.keys)
    }
    let log = log
    let done = DispatchSemaphore(value: 0)
    let queued = enqueue { connection in
      defer { done.signal() }
      guard let connection else { return }
      try? self.storeAcknowledgements(connection)
      let ownership = CallOwnership(connection, leaseDuration: settings.lease)
      for callId in handedOver { _ = try? ownership.release(callId, by: node) }
      try? ClusterPresence(connection, nodeExpiry: settings.nodeExpiry).leave(node)
      if !handedOver.isEmpty { log.info("handed \(handedOver.count) call(s) over to the other nodes") }
    }
    if queued { _ = done.wait(timeout: .now() + 5) }
    if !sender.close(waitingUpTo: .seconds(5)) { log.warning("cluster traffic was still waiting for Redis at exit") }
  }

  // MARK: - Devices (RemoteDevices)

  package func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink) {
    let node = thisNode
    let expiry = settings.nodeExpiry
    let queued = enqueue { connection in
      // Without Redis a connected device may get a push too many, never one too few.
      var connected = connectedHere
      if let connection,
        let holders = try? ClusterPresence(connection, nodeExpiry: expiry).devices(of: event.userId)
      {
        for holder in holders where holder.connected && holder.node != node { connected.insert(holder.deviceId) }
      }
      sink.handle(event, connectedDevices: connected)
    }
    if !queued { sink.handle(event, connectedDevices: connectedHere) }
  }

  package func detached(_ identity: Identity, session: String, ended: Bool) {
    guard ended else {
      // The nodes running the user's calls learn that the device's socket closed here.
      return submit("the session of \(identity.userId)/\(identity.deviceId)") { [self] connection throws(RedisError) in
        try announceNow(identity, session: session, connected: false, newSession: false, connection)
      }
    }
    let (node, expiry) = (thisNode, settings.nodeExpiry)
    submit("the end of a session of \(identity.userId)") { connection throws(RedisError) in
      try ClusterPresence(connection, nodeExpiry: expiry).unregister(
        .init(deviceId: identity.deviceId, node: node, sessionID: session), of: identity.userId)
    }
  }

  /// Registers where the device's session is now, closes an older session of it on another node,
  /// and tells the nodes running its user's calls (they keep its grace windows and re-ring it).
  package func announceNow(
    _ identity: Identity, session: String, connected: Bool, newSession: Bool, _ connection: any RedisClient
  ) throws(RedisError) {
    let node = thisNode
    let holder = ClusterPresence.Holder(
      deviceId: identity.deviceId, node: node, sessionID: session, connected: connected)
    let presence = ClusterPresence(connection, nodeExpiry: settings.nodeExpiry)
    let mailbox = Self.mailbox(connection, settings)
    if connected {
      let previous = try presence.register(holder, of: identity.userId)
      log.debug(
        "\(identity.userId)/\(identity.deviceId): session \(session) registered"
          + (previous.map { ", replacing \($0.sessionID) on \($0.node)" } ?? ""), sessionId: session)
      if let previous, previous.node != node {
        _ = try mailbox.send(
          ClusterLetterCodec.encode(.replaced(identity, sessionID: previous.sessionID)), to: previous.node)
      }
    } else if try !presence.markOffline(holder, of: identity.userId) {
      return  // the device has a newer session elsewhere already: its calls know it is there
    }
    let owners = Set(
      try CallOwnership(connection, leaseDuration: settings.lease).calls(of: identity.userId).map(\.owner))
    let letter = ClusterLetterCodec.encode(.device(identity, connected: connected, newSession: newSession))
    for owner in owners.sorted() where owner != node { _ = try mailbox.send(letter, to: owner) }
  }

  // MARK: - Calls (CallPlacement)

  /// Every call this hub does not run itself is found in Redis when its first request is sent on.
  package func location(of callId: CallID) -> CallLocation { .unknown }

  package func forward(_ message: ClientMessage, id: String, from: Identity, session: String, to node: String?) {
    guard let callId = message.callId else { return }
    let request = ForwardedRequest(
      message: message, id: id, from: from, origin: .init(node: thisNode, sessionID: session))
    let queued = enqueue { [self] connection in
      guard let connection else { return refuse(request, "the cluster's Redis cannot be reached; try again") }
      do {
        try route(request, callId, connection)
      } catch {
        log.error("cannot forward a \(message.type.rawValue) for call \(callId): \(error)", callId: callId)
        refuse(request, "the cluster's Redis failed; try again")
      }
    }
    if !queued { refuse(request, "this node is overloaded; try again") }
  }

  package func running(_ callId: CallID, users: [String]) {
    let isNew = owned.withLock { owned in
      guard owned[callId] == nil else { return false }
      owned[callId] = users
      return true
    }
    guard isNew else { return }
    let (node, lease, log) = (thisNode, settings.lease, log)
    submit("the placement of call \(callId)") { connection throws(RedisError) in
      let owner = try CallOwnership(connection, leaseDuration: lease).place(callId, for: node, users: users)
      if owner != node { log.warning("call \(callId) runs here but node \(owner) holds it", callId: callId) }
    }
  }

  package func answered(_ callId: CallID) {
    // A repeated accept adds nothing: the set is added to, not counted.
    guard let users = owned.withLock({ $0[callId] }) else { return }
    talking.withLock { _ = $0.insert(callId) }
    let lease = settings.lease
    submit("the connection of call \(callId)") { connection throws(RedisError) in
      try CallOwnership(connection, leaseDuration: lease).talking(callId, users: users)
    }
  }

  package func finished(_ callId: CallID) {
    guard let users = owned.withLock({ $0.removeValue(forKey: callId) }) else { return }
    epochs.withLock { $0[callId]?.endedAt = .now }
    talking.withLock { _ = $0.remove(callId) }
    let (node, lease) = (thisNode, settings.lease)
    submit("the end of call \(callId)") { connection throws(RedisError) in
      try CallOwnership(connection, leaseDuration: lease).finish(callId, by: node, users: users)
    }
  }

  /// Where a request goes: a new call is placed here unless another node has it; a known call's
  /// request goes to its owner; a dead owner's call is taken over first. What runs here comes
  /// back to the hub as a request forwarded from this node.
  private func route(_ request: ForwardedRequest, _ callId: CallID, _ connection: any RedisClient) throws(RedisError) {
    let ownership = CallOwnership(connection, leaseDuration: settings.lease)
    let letter = ClusterLetterCodec.encode(.request(request))
    if case .invite(let invite) = request.message {
      let users = [request.from.userId, invite.to]
      switch try ownership.placeInvite(callId, for: thisNode, caller: request.from.userId, callee: invite.to) {
      case .owner(let owner): return try run(request, callId, users, at: owner, letter, connection)
      case .near(let other): return try routeNear(request, callId, users, near: other, letter, connection)
      }
    }
    if let users = Self.users(of: request) {
      let owner = try ownership.place(callId, for: thisNode, users: users)
      return try run(request, callId, users, at: owner, letter, connection)
    }
    let forwarding = CallForwarding(connection, mailbox: Self.mailbox(connection, settings))
    for _ in 0..<2 {
      switch try awaitingAnswer(
        request, sent: Self.sent,
        { () throws(RedisError) in
          try forwarding.forward(letter, about: callId, from: thisNode)
        })
      {
      case .sent: return
      case .ownedHere: return handleHere(request)
      case .unowned:
        // Nobody runs it: a call its draining node handed over, or one whose lease lapsed, is
        // in the shared journal and runs here from now on; any other is answered from here.
        if try recovering(connection) {
          return refuse(request, "the cluster is recovering from a restart of its Redis; try again")
        }
        beginTakeOver([callId])
        if try ownership.claim(callId, for: thisNode) {
          if try !adopt([callId], connection, then: request) { try ownership.release(callId, by: thisNode) }
          return
        }
        // Another node claimed it meanwhile (it took the call over): the request goes there.
        endTakeOver([callId])
      case .full: return refuse(request, "the node running this call is overloaded; try again")
      case .ownerDead(let dead):
        beginTakeOver([callId])
        if try forwarding.takeOver(callId, from: dead, for: thisNode, lease: settings.lease) {
          log.info("took over call \(callId) from node \(dead), which stopped", callId: callId)
          try adopt([callId], connection, then: request)
          return
        }
        endTakeOver([callId])
      // Another node took it over first: send it there.
      }
    }
    refuse(request, "the call's owner is changing; try again")
  }

  /// A new call held by `owner`: run here, or sent on to the node that holds it (a retry).
  private func run(
    _ request: ForwardedRequest, _ callId: CallID, _ users: [String], at owner: String, _ letter: [UInt8],
    _ connection: any RedisClient
  ) throws(RedisError) {
    if owner == thisNode {
      owned.withLock { $0[callId] = users }
      return handleHere(request)
    }
    let mailbox = Self.mailbox(connection, settings)
    let result = try awaitingAnswer(
      request, sent: { $0 != .full }, { () throws(RedisError) in try mailbox.send(letter, to: owner) })
    if result == .full { refuse(request, "the node running this call is overloaded; try again") }
  }

  /// An invite whose users are in a call another node runs goes to that node, which decides
  /// busy and glare as one node does and then places the new call for itself (`running`). If
  /// that call has no live owner any more, it is taken over first, or the invite is placed here.
  private func routeNear(
    _ request: ForwardedRequest, _ callId: CallID, _ users: [String], near other: CallID, _ letter: [UInt8],
    _ connection: any RedisClient
  ) throws(RedisError) {
    let forwarding = CallForwarding(connection, mailbox: Self.mailbox(connection, settings))
    switch try awaitingAnswer(
      request, sent: Self.sent,
      { () throws(RedisError) in
        try forwarding.forward(letter, about: other, from: thisNode)
      })
    {
    case .sent: return
    case .full: return refuse(request, "the node running this call is overloaded; try again")
    case .ownerDead(let dead):
      beginTakeOver([other])
      if try forwarding.takeOver(other, from: dead, for: thisNode, lease: settings.lease) {
        log.info("took over call \(other) from node \(dead), which stopped", callId: other)
        try adopt([other], connection)
      } else {
        endTakeOver([other])
      }
    case .ownedHere, .unowned: break
    }
    let owner = try CallOwnership(connection, leaseDuration: settings.lease).place(callId, for: thisNode, users: users)
    try run(request, callId, users, at: owner, letter, connection)
  }

  /// The users a new call is listed under, for a message that starts one.
  private static func users(of request: ForwardedRequest) -> [String]? {
    switch request.message {
    case .invite(let invite): return [request.from.userId, invite.to]
    case .groupCreate(let create): return [request.from.userId] + create.members
    case .roomJoin: return [request.from.userId]
    default: return nil
    }
  }

  private func handleHere(_ request: ForwardedRequest) {
    inbox.current?.receive(.forwarded(request))
  }

  private func refuse(_ request: ForwardedRequest, _ reason: String) {
    let error = ServerMessage.error(
      .init(replyTo: request.id, code: .internal, message: reason, callId: request.message.callId))
    inbox.current?.receive(.replyArrived(sessionID: request.origin.sessionID, requestID: request.id, reply: error))
  }

  // MARK: - Taking calls over

  /// A call's lease is about to be won here: requests about it that reach the hub meanwhile (a
  /// letter from a node that already sees this node as the owner) wait for it to run here
  /// (`isBeingTakenOver`), instead of finding no such call.
  private func beginTakeOver(_ callIds: Set<CallID>) {
    let now = ContinuousClock.now
    adopting.withLock { for callId in callIds { $0[callId] = now } }
  }
  private func endTakeOver(_ callIds: Set<CallID>) { adopting.withLock { for callId in callIds { $0[callId] = nil } } }

  /// A take-over that never ended (a Redis step failed in the middle of it) stops counting after
  /// the hub's wait for it.
  package func isBeingTakenOver(_ callId: CallID) -> Bool {
    adopting.withLock { adopting in
      guard let started = adopting[callId] else { return false }
      if ContinuousClock.now - started < TakeOver.wait { return true }
      adopting[callId] = nil
      return false
    }
  }
  package func takenOver(_ callIds: Set<CallID>) { endTakeOver(callIds) }

  /// Loads the named calls (whose leases this node now holds) from the shared journal and runs
  /// them here, with the devices of their users that are connected elsewhere counted as such,
  /// then handles `request`, all in one hub event (which also ends the take-over that
  /// `beginTakeOver` started, live calls or not). Whether any was live.
  @discardableResult
  package func adopt(_ callIds: Set<CallID>, _ connection: any RedisClient, then request: ForwardedRequest? = nil)
    throws(RedisError) -> Bool
  {
    var stored: [StoredLiveCall] = []
    var groups: [StoredGroupCall] = []
    var ended: [RecentlyEndedCall] = []
    do {
      stored = try liveCalls.takeOver(callIds)
      groups = try liveCalls.takeOverGroupCalls(callIds.subtracting(stored.map(\.snapshot.callId)))
      // Ended ones too (within the router's retention): their requests get the answers the
      // call's own node would have given (invalid-state, get-call's outcome), not not-found.
      let since = Date().addingTimeInterval(-settings.endedRetention.seconds).millisecondsSince1970
      let live = Set(stored.map(\.snapshot.callId)).union(groups.map(\.snapshot.callId))
      ended = try liveCalls.endedCalls(callIds.subtracting(live), since: since)
    } catch {
      log.error("cannot read the calls to take over: \(error)")
    }
    guard !stored.isEmpty || !groups.isEmpty else {
      inbox.current?.receive(.adopt([], groups: [], ended: ended, connected: [], then: request, attempted: callIds))
      return false
    }
    owned.withLock {
      for call in stored {
        $0[call.snapshot.callId] = [call.snapshot.caller.userId, call.snapshot.calleeId]
      }
      for call in groups { $0[call.snapshot.callId] = Self.users(of: call) }
    }
    epochs.withLock {
      for call in stored { $0[call.snapshot.callId] = (call.epoch, nil) }
      for call in groups { $0[call.snapshot.callId] = (call.epoch, nil) }
    }
    var connected: [Identity] = []
    let presence = ClusterPresence(connection, nodeExpiry: settings.nodeExpiry)
    let users = stored.flatMap { [$0.snapshot.caller.userId, $0.snapshot.calleeId] } + groups.flatMap(Self.users(of:))
    do throws(RedisError) {
      for user in Set(users).sorted() {
        for holder in try presence.devices(of: user) where holder.connected {
          connected.append(Identity(userId: user, deviceId: holder.deviceId, name: nil))
        }
      }
    } catch {
      // The calls run here all the same; their devices count as they reconnect.
      log.error("cannot read the presence of the calls taken over: \(error)")
    }
    metrics.takeovers.increment(by: Double(stored.count + groups.count))
    if !groups.isEmpty { log.info("took over \(groups.count) group call(s): their SFU rooms are made again here") }
    inbox.current?.receive(
      .adopt(stored, groups: groups, ended: ended, connected: connected, then: request, attempted: callIds))
    return true
  }

  /// The users a group call is listed under: its members (the call's owner first).
  private static func users(of call: StoredGroupCall) -> [String] {
    var seen: Set<String> = []
    return ([call.snapshot.creator.userId] + call.snapshot.members.map(\.userId)).filter { seen.insert($0).inserted }
  }

  /// The calls of the shared journal that nobody runs (their node died, or handed them over),
  /// found on the housekeeping thread: the sender thread then takes those it wins, in its order
  /// with the requests it routes (one about such a call waits for the call to run here).
  package func adoptOrphans(_ connection: any RedisClient) throws(RedisError) {
    let stored: [(callId: CallID, users: [String])]
    do {
      stored =
        try liveCalls.liveCalls().map { ($0.snapshot.callId, [$0.snapshot.caller.userId, $0.snapshot.calleeId]) }
        + liveCalls.liveGroupCalls().map { ($0.snapshot.callId, Self.users(of: $0)) }
    } catch {
      log.error("cannot read the live calls: \(error)")
      return
    }
    let ownership = CallOwnership(connection, leaseDuration: settings.lease)
    let presence = ClusterPresence(connection, nodeExpiry: settings.nodeExpiry)
    var orphans: [CallID: [String]] = [:]
    let mine = owned.current
    for call in stored where mine[call.callId] == nil {
      let callId = call.callId
      if let owner = try ownership.owner(of: callId) {
        if owner == thisNode { continue }
        if try presence.isAlive(owner) { continue }
      }
      orphans[callId] = call.users
    }
    guard !orphans.isEmpty else { return }
    let found = orphans
    submit("taking over \(found.count) call(s)") { [self] connection throws(RedisError) in
      try claimOrphans(found, connection)
    }
  }

  private func claimOrphans(_ orphans: [CallID: [String]], _ connection: any RedisClient) throws(RedisError) {
    guard try !recovering(connection) else { return }
    let ownership = CallOwnership(connection, leaseDuration: settings.lease)
    let forwarding = CallForwarding(connection, mailbox: Self.mailbox(connection, settings))
    let presence = ClusterPresence(connection, nodeExpiry: settings.nodeExpiry)
    var won: Set<CallID> = []
    let mine = owned.current
    beginTakeOver(Set(orphans.keys))
    defer { endTakeOver(Set(orphans.keys).subtracting(won)) }
    for (callId, users) in orphans.sorted(by: { $0.key < $1.key }) where mine[callId] == nil {
      if let owner = try ownership.owner(of: callId) {
        if owner != thisNode, try !presence.isAlive(owner),
          try forwarding.takeOver(callId, from: owner, for: thisNode, lease: settings.lease)
        {
          won.insert(callId)
        }
      } else if try ownership.place(callId, for: thisNode, users: users) == thisNode {
        won.insert(callId)
      }
    }
    guard !won.isEmpty else { return }
    log.info("took over \(won.count) call(s) that no running node held")
    if try !adopt(won, connection) {
      // Ended meanwhile (its end reached the journal after the scan read it): nothing to run.
      for callId in won { try ownership.release(callId, by: thisNode) }
    }
  }

  /// Renews the leases of the calls this node runs; a lease lost (a pause longer than the lease)
  /// is logged: another node runs the call now.
  package func renewLeases(_ connection: any RedisClient) throws(RedisError) {
    let now = ContinuousClock.now
    epochs.withLock { $0 = $0.filter { _, entry in entry.endedAt.map { now - $0 < Self.epochRetention } ?? true } }
    let callIds = Array(owned.current.keys)
    guard !callIds.isEmpty else { return }
    let ownership = CallOwnership(connection, leaseDuration: settings.lease)
    var givenUp: [CallID] = []
    // Lost while Redis kept its state (a Redis that lost it is `checkClusterMark`'s): another node
    // took the call over while this one stalled, and may have ended it since. Taking the lease
    // back would run the call twice; it goes, and requests about it follow its owner.
    for callId in try ownership.renew(callIds, for: thisNode) {
      owned.withLock { _ = $0.removeValue(forKey: callId) }
      epochs.withLock { $0[callId]?.endedAt = now }
      talking.withLock { _ = $0.remove(callId) }
      givenUp.append(callId)
      log.warning(
        "lost the lease of call \(callId): another node took it over, so it stops running here", callId: callId)
    }
    if !givenUp.isEmpty { inbox.current?.receive(.relinquish(givenUp)) }
  }

  /// Places every call this node runs again, with its users' lists and busy marks (Redis lost them).
  package func placeOwnedCallsAgain(_ connection: any RedisClient) throws(RedisError) {
    let ownership = CallOwnership(connection, leaseDuration: settings.lease)
    let connected = talking.current
    var givenUp: [CallID] = []
    for (callId, users) in owned.current.sorted(by: { $0.key < $1.key }) {
      if try ownership.place(callId, for: thisNode, users: users) != thisNode {
        owned.withLock { _ = $0.removeValue(forKey: callId) }
        givenUp.append(callId)
        continue
      }
      if connected.contains(callId) { try ownership.talking(callId, users: users) }
    }
    if !givenUp.isEmpty { inbox.current?.receive(.relinquish(givenUp)) }
  }

  // MARK: - Fencing (LiveCallFence)

  package func epoch(of callId: CallID) -> Int64 { epochs.withLock { $0[callId]?.epoch ?? 1 } }

  // MARK: - Letters

  private func arrived(_ letters: [ClusterLetter]) {
    for letter in letters { metrics.letters.labels(letter.kind).increment() }
    let answered = letters.compactMap { letter -> String? in
      switch letter {
      case .reply(let sessionID, let requestID, _), .unstoredReply(let sessionID, let requestID, _):
        return sessionID + "\u{0}" + requestID
      default: return nil
      }
    }
    if !answered.isEmpty { unanswered.withLock { for key in answered { $0.answered(key) } } }
    inbox.current?.receive(.letters(letters))
  }

  /// Sends a request's letter with its answer awaited from before it goes: the owner may answer,
  /// and the inbox reader take the answer in (`arrived`), before `send` returns here.
  private func awaitingAnswer<Outcome>(
    _ request: ForwardedRequest, sent: (Outcome) -> Bool, _ send: () throws(RedisError) -> Outcome
  ) throws(RedisError) -> Outcome {
    let new = unanswered.withLock { $0.sending(request, at: .now) }
    let outcome: Outcome
    do {
      outcome = try send()
    } catch {
      if new { unanswered.withLock { $0.notSent(request) } }
      throw error
    }
    if new && !sent(outcome) { unanswered.withLock { $0.notSent(request) } }
    return outcome
  }

  private static func sent(_ result: CallForwarding.Result) -> Bool {
    if case .sent = result { return true }
    return false
  }

  /// Routes again the requests whose answer is overdue (their owner may have died with them in
  /// its inbox); after `maxAttempts` the device is told to try again itself.
  package func retryUnanswered(_ connection: any RedisClient) throws(RedisError) {
    let (retry, expired) = unanswered.withLock { $0.overdue(at: .now) }
    for request in expired { refuse(request, "the node running this call did not answer; try again") }
    for request in retry {
      guard let callId = request.message.callId else { continue }
      log.info("no answer yet about call \(callId) from its node: routing it again", callId: callId)
      try route(request, callId, connection)
    }
  }

  package func submit(_ what: String, _ job: @escaping @Sendable (any RedisClient) throws(RedisError) -> Void) {
    let log = log
    let queued = enqueue { connection in
      guard let connection else { return log.error("the cluster's Redis cannot be reached: lost \(what)") }
      do {
        try job(connection)
      } catch {
        log.error("the cluster's Redis failed: lost \(what): \(error)")
      }
    }
    if !queued && !stopped.current { log.error("too much cluster traffic is waiting for Redis: dropped \(what)") }
  }

  package func presence(_ connection: any RedisClient) -> ClusterPresence {
    ClusterPresence(connection, nodeExpiry: settings.nodeExpiry)
  }

  package static func mailbox(_ connection: any RedisClient, _ settings: Settings) -> NodeMailbox {
    NodeMailbox(connection, capacity: settings.inboxCapacity, expiry: settings.inboxExpiry)
  }
}
