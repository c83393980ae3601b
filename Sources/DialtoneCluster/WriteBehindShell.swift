import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import Foundation

/// Drives a `WriteBehindHolder` on the node (`--cluster-sessions write-behind`): the sessions held
/// here are numbered by this node, a relayed candidate is written at once and stored after, and
/// everything else is written once its batch is stored (docs/architecture.md, "Next: write-behind
/// sessions"). The hub's messages for those sessions come here instead of `SessionLedger`'s
/// store-first steps; unnumbered letters other nodes left in this node's inbox come from the
/// inbox reader.
///
/// The holder sits behind a lock and is called from the hub's thread, the inbox reader and the
/// sender (batch results); its effects are applied outside the lock, in the order it returned
/// them, by whichever caller drains them first (`pump`), because applying a write on the hub's
/// thread re-enters the hub. Batches run on the link's sender, after the steps the hub flushed
/// before them: an answer never reaches Redis, hence its client, before what its request caused.
package final class WriteBehindShell: Sendable {
  package typealias Instant = ContinuousClock.Instant

  private struct State {
    var holder: WriteBehindHolder
    /// The current hub event's frames (submitted whole at its flush).
    var event: [WriteBehindHolder.Outgoing] = []
    /// The current hub event's answers to relayed candidates, written without a seq
    /// (`answerIfHeld`).
    var answers: [WriteBehindHolder.UnstoredAnswer] = []
    /// The sessions held here by user and device, for messages the hub addresses to a device.
    var devices: [String: [String: String]] = [:]
    var owners: [String: Identity] = [:]
    /// Effects not yet applied, in order, and whether a caller is applying them.
    var outbox: [WriteBehindHolder.Effect] = []
    var pumping = false
    /// The holder's lapses already logged (each is logged once, also one a renewal found and
    /// ended before the effects were applied: the lease is live again by then).
    var lapsesLogged = 0
    /// Resumes between their script and their hold (`resuming`): the inbox is trimmed no further
    /// than the reader had read before the first of them began (`pinned`), since the letters'
    /// copies the script adds come after that.
    var resuming = 0
    var pinned: InboxPosition?
    /// How far the reader had read at the last trim.
    var read: InboxPosition?
    /// Answers to requests other nodes forwarded, each waiting for the holder's events through
    /// `event` to be stored (`flush(replies:)`), in the order they go.
    var replies = WaitingQueue()
    /// The holder's events stored through here, as its effects applied so far said.
    var storedThrough: UInt64 = 0
  }

  private struct WaitingReplies {
    let event: UInt64
    let replies: ForwardedReplies
  }

  /// The waiting answers' entries (each an event's: one or more answers) and how many answers
  /// they hold, at most `WriteBehindHolder.Limits.maxWaitingReplies`: the count changes only
  /// here, with the entries.
  private struct WaitingQueue {
    private(set) var entries: [WaitingReplies] = []
    private(set) var answers = 0

    mutating func insert(_ entry: WaitingReplies, at index: Int) {
      entries.insert(entry, at: index)
      answers += entry.replies.requests.count
    }

    /// The entries whose events are stored through `through`, taken from the front.
    mutating func takeDue(through: UInt64) -> [ForwardedReplies] {
      let count = entries.prefix { $0.event <= through }.count
      let due = entries.prefix(count).map(\.replies)
      entries.removeFirst(count)
      answers -= due.reduce(0) { $0 + $1.requests.count }
      return due
    }

    /// The answers of the entries waiting for events after `through`, taken out, in one pass
    /// over the queue: the entries kept move up in their order, the rest are cut off the end.
    mutating func takeAfter(_ through: UInt64) -> [RefusedRequest] {
      var dropped: [RefusedRequest] = []
      var kept = 0
      for index in entries.indices {
        if entries[index].event > through {
          dropped += entries[index].replies.requests
        } else {
          entries.swapAt(kept, index)
          kept += 1
        }
      }
      entries.removeLast(entries.count - kept)
      answers -= dropped.count
      return dropped
    }
  }

  /// The answers of one hub event to requests other nodes forwarded here (`ClusterLink.reply`):
  /// `send` stores them (the answers in the requesters' sessions, and the letters telling their
  /// nodes), on the sender.
  package struct ForwardedReplies: Sendable {
    /// The requesting sessions and request ids.
    package let requests: [RefusedRequest]
    package let send: @Sendable () -> Void

    package init(requests: [RefusedRequest], send: @escaping @Sendable () -> Void) {
      self.requests = requests
      self.send = send
    }
  }

  private let state: Locked<State>
  private let node: String
  private let sender: RedisWorker
  private let inbox: Locked<(any ClusterInbox)?>
  /// The link's sessions to make unresumable once Redis answers (`ClusterLink.healPoisoned`).
  private let poison: Locked<SessionPoison>
  private let limits: SessionLedger.Limits
  /// The node's own log, when batches go there instead of each session's keys (`logStripes`).
  package let logStore: WriteBehindLogStore?
  private let now: @Sendable () -> Instant
  private let log: Log
  /// Told of each batch sent: what sent it and its frames (`/metrics`).
  private let onBatch: @Sendable (WriteBehindBatch.Cut, Int) -> Void
  /// Told how many answers to forwarded requests were dropped over `maxWaitingReplies` (`/metrics`).
  private let onAnswersOverBound: @Sendable (Int) -> Void
  /// Runs the periodic lease check (`tick`). The batch window's wakes run on the sender
  /// (`RedisWorker.wake`), where the batch they cut goes anyway.
  private let timers = DispatchQueue(label: "dialtone.write-behind.timers")
  private let ticker: Locked<(any DispatchSourceTimer)?> = Locked(nil)
  /// Unstored frames the holder kept when the reader last looked (`acceptsLetters`).
  package var acceptsLetters: Bool { state.withLock { $0.holder.acceptsLetters } }

  /// The holder's lease, and how many times it lapsed (tests).
  package var lease: (WriteBehindHolder.Lease, lapses: Int) { state.withLock { ($0.holder.lease, $0.holder.lapses) } }

  /// `now`: the monotonic clock the lease and batch window count by (tests inject theirs).
  package init(
    node: String, holder: WriteBehindHolder.Limits, ledger: SessionLedger.Limits, sender: RedisWorker,
    inbox: Locked<(any ClusterInbox)?>, poison: Locked<SessionPoison> = Locked(SessionPoison()), log: Log,
    now: @escaping @Sendable () -> Instant = { ContinuousClock.now },
    onBatch: @escaping @Sendable (WriteBehindBatch.Cut, Int) -> Void = { _, _ in },
    onAnswersOverBound: @escaping @Sendable (Int) -> Void = { _ in }, logStore: WriteBehindLogStore? = nil
  ) {
    self.logStore = logStore
    self.onBatch = onBatch
    self.onAnswersOverBound = onAnswersOverBound
    self.node = node
    self.sender = sender
    self.inbox = inbox
    self.poison = poison
    self.limits = ledger
    let skew = Locked(Duration.zero)
    self.skew = skew
    self.now = { now() + skew.current }
    self.log = log
    state = Locked(State(holder: WriteBehindHolder(limits: holder, renewedAt: now())))
    sender.onWake { [weak self] in self?.tick() }
  }

  /// How far this node's monotonic clock jumped (tests: a node frozen past its lease).
  private let skew: Locked<Duration>
  package func jumpClock(by duration: Duration) { skew.withLock { $0 += duration } }

  /// Checks the lease every `interval` even when nothing happens (a node whose Redis is away
  /// must still close its sockets in time), and sends a batch that failed again. `joinedAt`:
  /// when the node's first heartbeat was sent (`WriteBehindHolder.joined`).
  package func start(checkingEvery interval: Duration, joinedAt: Instant) {
    state.withLock { $0.holder.joined(sentAt: joinedAt) }
    let timer = DispatchSource.makeTimerSource(queue: timers)
    let nanoseconds = Self.nanoseconds(interval)
    timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(max(1_000_000, nanoseconds)))
    timer.setEventHandler { [weak self] in self?.tick() }
    timer.resume()
    ticker.withLock { $0 = timer }
  }

  package func stop() { ticker.withLock { $0?.cancel() } }

  // MARK: Sessions

  /// Whether the session is held here under write-behind.
  package func holds(_ session: String) -> Bool { state.withLock { $0.holder.isHeld(session) } }

  /// This node won the session at `epoch` (an open or resume); numbering goes on after `lastSeq`,
  /// the last seq Redis has; a resume's `letters` (its previous holder's, unstored) come first,
  /// and the reader's copies of letters up to `lettersAfter` are not numbered again
  /// (`WriteBehindHolder.hold`). False when the node's lease is stale: it takes no session then.
  package func hold(
    _ session: String, of identity: Identity, epoch: UInt64, lastSeq: UInt64, onces: [String] = [],
    lettersAfter: String? = nil, letters: [WriteBehindHolder.Outgoing] = [], letterOrigins: [String] = [],
    storedRequests: Set<String> = []
  ) -> Bool {
    let held = state.withLock { state in
      let effects = state.holder.hold(
        session, epoch: epoch, lastSeq: lastSeq, onces: onces, lettersAfter: lettersAfter, letters: letters,
        letterOrigins: letterOrigins, storedRequests: storedRequests, now: now())
      state.outbox += effects
      guard state.holder.isHeld(session) else { return false }
      if let old = state.owners[session] { state.devices[old.userId]?[old.deviceId] = nil }
      state.owners[session] = identity
      state.devices[identity.userId, default: [:]][identity.deviceId] = session
      return true
    }
    pump()
    // Called on the sender, in the open's job, which hands the hub its answer last: a job queued
    // now runs after the hub has it.
    if held, !sender.submit({ [weak self] _ in self?.announced(session, epoch: epoch) }) {
      announced(session, epoch: epoch)
    }
    return held
  }

  /// Runs a resume, from its script to its hold: meanwhile the inbox is not trimmed past what
  /// the reader had read before, since the copies of the letters the script adds to it
  /// (`SessionLedger.resumeHolding`) are kept only from the hold on (numbered there, or retained
  /// if the lease lapsed). Not trimming at all would starve the trim while resumes follow each
  /// other (a dead node's sessions coming here).
  package func resuming<Result>(_ body: () throws(RedisError) -> Result) throws(RedisError) -> Result {
    state.withLock { state in
      if state.resuming == 0 { state.pinned = state.read }
      state.resuming += 1
    }
    defer { state.withLock { $0.resuming -= 1 } }
    return try body()
  }

  private func announced(_ session: String, epoch: UInt64) {
    state.withLock { $0.outbox += $0.holder.announced(session, epoch: epoch) }
    pump()
  }

  /// The session ended here, or closed: nothing more of it is numbered here (what this node's
  /// clients sent it that Redis does not have goes where it is now: `WriteBehindHolder.release`).
  package func release(_ session: String) {
    let epoch = state.withLock { state -> UInt64? in
      let epoch = state.holder.sessions.index(forKey: session).map { state.holder.sessions.values[$0].epoch }
      state.outbox += state.holder.release(session)
      Self.forget(session, &state)
      return epoch
    }
    logStore?.forget(session)
    pump()
    // The node log (point 7's release): what this node's stripe keeps of the session (its
    // checkpoint, and the entries a marker of its own would hold) goes, on the sender, after the
    // frames the release sent on.
    guard let logStore, let epoch else { return }
    let log = log
    let queued = sender.submit { connection in
      guard let connection else { return }
      do {
        try logStore.ended(session, epoch: epoch, on: connection)
      } catch {
        log.warning("session \(session)'s checkpoint stays in this node's log until it expires: \(error)")
      }
    }
    if !queued { log.warning("session \(session)'s checkpoint stays in this node's log until it expires") }
  }

  /// Takes the client's acknowledgement when the session's frames are in the node's log
  /// (`WriteBehindLogStore`): it trims the log per stripe (`trimLog`) instead of each session's
  /// keys. False: the acknowledgement goes to the session's keys as before.
  package func acknowledged(_ session: String, through seq: UInt64) -> Bool {
    guard let logStore, holds(session) else { return false }
    logStore.acknowledge(session, through: seq)
    return true
  }

  /// Trims the node's log of the entries every client acknowledged (housekeeping): one trim per
  /// stripe that has some, whatever sessions they hold.
  package func trimLog(_ redis: any RedisClient) throws(RedisError) {
    try logStore?.trim(on: redis, held: { [weak self] in self?.holds($0) ?? false })
  }

  private static func forget(_ session: String, _ state: inout State) {
    guard let who = state.owners.removeValue(forKey: session) else { return }
    if state.devices[who.userId]?[who.deviceId] == session { state.devices[who.userId]?[who.deviceId] = nil }
    if state.devices[who.userId]?.isEmpty == true { state.devices[who.userId] = nil }
  }

  /// The user's sessions held here that a message for `device` (every device when nil) but
  /// `skipping` goes to: device and session.
  package func sessions(of userId: String, device: String?, skipping: Set<String>) -> [(String, String)] {
    state.withLock { state in
      guard let devices = state.devices[userId] else { return [] }
      if let device { return devices[device].map { [(device, $0)] } ?? [] }
      return devices.filter { !skipping.contains($0.key) }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
  }

  // MARK: Frames

  /// Admission before the hub handles a request of this node's own client
  /// (`WriteBehindHolder.admit`): false when the node cannot take what it may cause now (the hub
  /// answers `rate-limited` and handles nothing).
  package func admit(_ requestID: String, of session: String, bytes: Int) -> Bool {
    state.withLock { $0.holder.admit(requestID, of: session, bytes: bytes, now: now()) }
  }

  /// A frame of the hub's current event for a session held here.
  package func add(_ outgoing: WriteBehindHolder.Outgoing) { state.withLock { $0.event.append(outgoing) } }

  /// Whether the answers to these sessions' forwarded requests must wait for `flush(replies:)`:
  /// the current event has frames for sessions held here, or an earlier answer to one of these
  /// sessions waits still (a requester's answers go in the order they were given). If not, they
  /// may be stored at once, with the event's other steps.
  package func defersReplies(to requests: [RefusedRequest]) -> Bool {
    state.withLock { state in
      !state.event.isEmpty || Self.lastWaiting(for: requests, state.replies.entries) != nil
    }
  }

  /// The event the latest answer waiting for one of these sessions waits for.
  private static func lastWaiting(for requests: [RefusedRequest], _ waiting: [WaitingReplies]) -> UInt64? {
    guard !waiting.isEmpty else { return nil }
    for entry in waiting.reversed()
    where entry.replies.requests.contains(where: { answer in
      requests.contains { $0.sessionID == answer.sessionID }
    }) {
      return entry.event
    }
    return nil
  }

  /// Queues answers to wait for the holder's events through `event` (none when those are stored
  /// already: they go once the effects before them are applied), after every answer to the same
  /// sessions waiting before them. Answers that would pass `maxWaitingReplies` are not queued:
  /// returned, to be dropped (`dropReplies`), as an event's over the node's bound are.
  private static func wait(_ replies: ForwardedReplies, for event: UInt64, _ state: inout State) -> [RefusedRequest] {
    guard state.replies.answers + replies.requests.count <= state.holder.limits.maxWaitingReplies else {
      return replies.requests
    }
    var event = event > state.holder.storedThrough ? event : 0
    if event > 0 { state.holder.awaitStored(through: event) }
    event = max(event, lastWaiting(for: replies.requests, state.replies.entries) ?? 0)
    let at = state.replies.entries.lastIndex { $0.event <= event }.map { $0 + 1 } ?? 0
    state.replies.insert(WaitingReplies(event: event, replies: replies), at: at)
    return []
  }

  /// Answers waiting for their events to be stored (tests: the bound holds).
  package var repliesWaiting: Int { state.withLock { $0.replies.answers } }

  /// The answer to a relayed candidate of a session held here, in the current event: written
  /// without a seq, never stored (`WriteBehindHolder.UnstoredAnswer`); false when the session is
  /// not held here (its answer is stored as any other).
  package func answerIfHeld(_ answer: WriteBehindHolder.UnstoredAnswer) -> Bool {
    state.withLock { state in
      guard state.holder.isHeld(answer.session) else { return false }
      state.answers.append(answer)
      return true
    }
  }

  /// `add` if its session is held here (one lock for both: the hub asks for every message);
  /// whether it was.
  package func addIfHeld(_ outgoing: WriteBehindHolder.Outgoing) -> Bool {
    state.withLock { state in
      guard state.holder.isHeld(outgoing.session) else { return false }
      state.event.append(outgoing)
      return true
    }
  }

  /// The hub's event is over: its frames are numbered together, or refused together. A relayed
  /// candidate's request whose event was refused because too much waits for Redis is answered
  /// `rate-limited` by the hub (`requestsRefused`: it sends it again, and its peers get what it
  /// causes then); any other request refused so changed the call's state already, so its
  /// sessions resync (made unresumable once Redis answers, `poison`, and closed); an event that
  /// answered nobody, or one refused because this node's lease lapsed, closes its sessions (their
  /// clients resume elsewhere or later).
  ///
  /// `replies`: the event's answers to requests other nodes forwarded (`defersReplies`). They go
  /// once the holder has stored the event's frames, and every event's before it: the requester is
  /// answered only once what its request caused for the sessions held here is stored (its node
  /// writes the answer once stored, and this node may die before its batch), as a local
  /// request's answer, a frame of the same event, is. An event with no frame queued (every one a
  /// repeat, or for a session lost here: those go on before) waits for the events before it. An
  /// event refused because the lease lapsed, or one refused over the bounds that the requester
  /// may send again (a relayed candidate's), drops its answers, as the lapse drops those waiting:
  /// the hub forgets them (`forwardedDropped`), so that the request forwarded again is handled
  /// afresh rather than answered from memory with nothing of it stored; an event refused over the
  /// node's bound whose request changed the call's state goes at once (its sessions here resync).
  /// Answers that would pass the bound of those waiting (`maxWaitingReplies`) are dropped too.
  package func flush(replies: ForwardedReplies? = nil) {
    // `overBound`: whether `dropped` are answers `wait` found over `maxWaitingReplies` (the only
    // answers it returns), not those of a refused event.
    let (closing, refused, dropped, overBound) = state.withLock {
      state -> ([String], [RefusedRequest], [RefusedRequest], Bool) in
      guard !state.event.isEmpty || !state.answers.isEmpty else {
        return ([], [], replies.map { Self.wait($0, for: 0, &state) } ?? [], true)
      }
      let (event, answers) = (state.event, state.answers)
      state.event.removeAll(keepingCapacity: true)
      state.answers.removeAll(keepingCapacity: true)
      let submitted = state.holder.submit(event, answers: answers, now: now())
      state.outbox += submitted.effects
      guard let refusal = submitted.refusal else {
        let event = submitted.event ?? state.holder.eventsNumbered
        return ([], [], replies.map { Self.wait($0, for: event, &state) } ?? [], true)
      }
      if !submitted.resyncing.isEmpty {
        poison.withLock { for session in submitted.resyncing { $0.add(session: session) } }
        return (submitted.resyncing, [], replies.map { Self.wait($0, for: 0, &state) } ?? [], true)
      }
      let dropped = replies?.requests ?? []
      let requests =
        event.compactMap { outgoing in
          outgoing.requestID.map { RefusedRequest(sessionID: outgoing.session, requestID: $0) }
        } + answers.map { RefusedRequest(sessionID: $0.session, requestID: $0.requestID) }
      if refusal == .backlog, !requests.isEmpty { return ([], requests, dropped, false) }
      let requesters = Set(requests.map(\.sessionID))
      return ((requesters.isEmpty ? Set(event.map(\.session)) : requesters).sorted(), [], dropped, false)
    }
    if !dropped.isEmpty {
      if overBound { onAnswersOverBound(dropped.count) }
      dropReplies(dropped)
    }
    if !refused.isEmpty {
      log.warning("\(refused.count) request(s) answered rate-limited: too much waits for Redis")
      inbox.current?.receive(.requestsRefused(refused))
    }
    if !closing.isEmpty {
      log.warning(
        "\(closing.count) session(s) closed: too much waits for Redis (they resync if their request was handled), or this node's lease lapsed"
      )
      inbox.current?.receive(.sessionsBroken(closing))
    }
    pump()
  }

  /// An unnumbered letter another node stored in this node's inbox at `position`.
  package func letter(_ outgoing: WriteBehindHolder.Outgoing, position: String) {
    letters([(outgoing, position)])
  }

  /// Unnumbered letters of one inbox read, in inbox order, each with its position: numbered under
  /// one lock and their effects applied together, so that the frames they write reach the hub in
  /// one hand-off (`framesStored`) rather than one per letter (a post to the network thread each).
  package func letters(_ letters: [(WriteBehindHolder.Outgoing, position: String)]) {
    guard !letters.isEmpty else { return }
    state.withLock { state in
      let now = now()
      for (outgoing, position) in letters {
        state.outbox += state.holder.letter(outgoing, position: position, now: now)
      }
    }
    pump()
  }

  /// How far the inbox may be trimmed once read through `read` (nil: not at all): never past a
  /// letter not stored yet, nor one retained for a session this node lost, which whoever resumes
  /// the session reads from the inbox (`SessionLedger.resumeHolding`). With `redis`, retained
  /// letters whose resume has happened are let go first.
  package func trimPoint(read: String, _ redis: (any RedisClient)? = nil) throws(RedisError) -> String? {
    if let redis { try releaseRetained(redis) }
    let (keeps, dropped, pin) = state.withLock { state -> (InboxPosition?, Int, InboxPosition??) in
      defer { if let at = InboxPosition(read) { state.read = at } }
      return (state.holder.keepsFrom, state.holder.retainedDropped, state.resuming > 0 ? .some(state.pinned) : .none)
    }
    if dropped > reportedDrops.current {
      reportedDrops.withLock { $0 = dropped }
      log.error("\(dropped) retained letter(s) left the inbox over the bound: a resume may miss them")
    }
    let through = Self.trimPoint(read: read, keeps: keeps)
    guard case .some(let pinned) = pin else { return through }
    guard let pinned, let through else { return nil }
    return InboxPosition(through).map { min($0, pinned).description } ?? pinned.description
  }

  private static func trimPoint(read: String, keeps: InboxPosition?) -> String? {
    guard let keeps else { return read }
    guard let before = keeps.predecessor else { return nil }
    guard let read = InboxPosition(read) else { return before.description }
    return min(read, before).description
  }

  private let reportedDrops = Locked(0)

  /// At most this many sessions' retained letters are checked per trim.
  private static let releaseBatch = 256

  /// A retained letter may leave the inbox once the session's resume read it (its holder is
  /// another node now, or its stored letter position, `lp`, is at or past it: a resume here, or
  /// a batch), or the session is gone. Only letters retained before the read are let go: one
  /// retained since may have arrived after a resume here that this node has not held yet.
  private func releaseRetained(_ redis: any RedisClient) throws(RedisError) {
    let retained = state.withLock { $0.holder.retained }
    guard !retained.isEmpty else { return }
    var sessions: [String] = []
    var seen: Set<String> = []
    for entry in retained where seen.insert(entry.outgoing.session).inserted {
      sessions.append(entry.outgoing.session)
      if sessions.count == Self.releaseBatch { break }
    }
    let replies = try redis.pipeline(sessions.map { ["HMGET", SessionLedger.keys($0).meta, "owner", "lp"] })
      .throwingFirstError()
    var done: [String: InboxPosition?] = [:]  // a session's letters through the position, or all (nil)
    for (session, reply) in zip(sessions, replies) {
      guard let fields = reply.elements, fields.count == 2 else { throw .unexpectedReply(reply) }
      guard let owner = fields[0].string, owner == node else {
        done[session] = .some(nil)
        continue
      }
      if let position = fields[1].string.flatMap(InboxPosition.init) { done[session] = position }
    }
    var release: Set<InboxPosition> = []
    for entry in retained {
      guard let through = done[entry.outgoing.session] else { continue }
      if through.map({ entry.position <= $0 }) ?? true { release.insert(entry.position) }
    }
    if !release.isEmpty { state.withLock { $0.holder.forget(retained: release) } }
  }

  // MARK: The lease and the clock

  /// A heartbeat sent at `sentAt` succeeded (`ClusterHousekeeping`).
  package func leaseRenewed(sentAt: Instant) {
    state.withLock { $0.outbox += $0.holder.leaseRenewed(sentAt: sentAt, now: now()) }
    pump()
  }

  package func tick() {
    state.withLock { $0.outbox += $0.holder.tick(now: now()) }
    pump()
  }

  /// Answers that will not go: the hub forgets them, so that the request forwarded again is
  /// handled afresh.
  private func dropReplies(_ requests: [RefusedRequest]) {
    log.warning(
      "\(requests.count) answer(s) to forwarded requests dropped: what they caused here was not stored, or too many answers wait (the requester's node routes them again)"
    )
    inbox.current?.receive(.forwardedDropped(requests))
  }

  // MARK: Applying effects

  /// Applies the effects waiting, in order, then sends the answers whose events are stored (after
  /// every effect before: the frames of a session lost here go on before the answer); a caller
  /// that finds another applying them leaves them to it. `onSender`: the caller is a job of the
  /// sender, whose own Redis work is done (`answer`).
  private func pump(onSender: Bool = false) {
    // One lock for both questions: this runs for every event the hub flushes.
    let (lapsed, begun) = state.withLock { state -> (Bool, Bool) in
      let lapsed = state.holder.lapses != state.lapsesLogged
      state.lapsesLogged = state.holder.lapses
      guard !state.pumping, !state.outbox.isEmpty || Self.replyDue(state) else { return (lapsed, false) }
      state.pumping = true
      return (lapsed, true)
    }
    if lapsed { log.warning("this node's lease lapsed: it stopped writing and closed the sessions it held") }
    guard begun else { return }
    while true {
      let (effects, due) = state.withLock { state -> ([WriteBehindHolder.Effect], [ForwardedReplies]) in
        if !state.outbox.isEmpty {
          defer { state.outbox.removeAll(keepingCapacity: true) }
          return (state.outbox, [])
        }
        let due = state.replies.takeDue(through: state.storedThrough)
        if due.isEmpty { state.pumping = false }
        return ([], due)
      }
      if effects.isEmpty, due.isEmpty { return }
      apply(effects, onSender: onSender)
      for replies in due { replies.send() }
    }
  }

  private static func replyDue(_ state: State) -> Bool {
    state.replies.entries.first.map { $0.event <= state.storedThrough } ?? false
  }

  private func apply(_ effects: [WriteBehindHolder.Effect], onSender: Bool) {
    var writes: [StoredFrame] = []
    var closed: [String] = []
    var unheld: [SessionLedger.Step] = []
    var answers: [WriteBehindHolder.UnstoredAnswer] = []
    // Writes and closes go to the hub together, and before a store that follows them, in order;
    // answers after the frames sent on (`unheld`), behind them on the sender.
    func hand() {
      if !writes.isEmpty { inbox.current?.receive(.framesStored(writes)) }
      if !closed.isEmpty { inbox.current?.receive(.sessionsBroken(closed)) }
      if !unheld.isEmpty { storeUnheld(unheld) }
      if !answers.isEmpty { answer(answers, onSender: onSender) }
      (writes, closed, unheld, answers) = ([], [], [], [])
    }
    for effect in effects {
      switch effect {
      case .write(let session, let seq, let bytes):
        writes.append(StoredFrame(sessionID: session, seq: seq, bytes: bytes))
      case .close(let session, let why):
        state.withLock { Self.forget(session, &$0) }
        // Its frames keep no entry of the node's log from now on (a taker holds what it needs).
        logStore?.forget(session)
        log.info("session \(session) closes here (\(why)): its client resumes", sessionId: session)
        closed.append(session)
      case .unheld(let outgoing):
        unheld.append(
          .append(outgoing.frame, session: outgoing.session, requestID: outgoing.requestID, once: outgoing.once))
      case .store(let batch):
        hand()
        onBatch(batch.cut, batch.frameCount)
        store(batch)
      case .eventsStored(let through):
        state.withLock { $0.storedThrough = max($0.storedThrough, through) }
      case .eventsDropped(let through):
        // Answers waiting for events the lapse dropped never go; those due already do.
        let dropped = state.withLock { state -> [RefusedRequest] in
          let dropped = state.replies.takeAfter(state.storedThrough)
          state.storedThrough = max(state.storedThrough, through)
          return dropped
        }
        if !dropped.isEmpty { dropReplies(dropped) }
      case .answer(let answer):
        answers.append(answer)
      case .wake(let at):
        // On the sender's thread, where the batch the tick cuts is stored: a dispatch timer cost a
        // timer thread's wake and a worker's per window, then a hand-off to the sender.
        sender.wake(at: ContinuousClock.now + (at - now()))
      }
    }
    hand()
  }

  /// A dispatch delay (never negative).
  private static func nanoseconds(_ duration: Duration) -> Int {
    max(0, Int(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000))
  }

  /// Frames for sessions no longer held here go where the session is now, as other nodes send
  /// theirs (`SessionLedger`'s append: an unnumbered letter to a write-behind holder), on the
  /// sender, before any later batch.
  private func storeUnheld(_ steps: [SessionLedger.Step]) {
    let (node, limits, log) = (node, limits, log)
    let queued = sender.submit { connection in
      guard let connection else {
        return log.error("\(steps.count) frame(s) of a session taken over are lost: no Redis")
      }
      do {
        _ = try SessionLedger(connection, limits: limits).run(steps, from: node)
      } catch {
        log.error("\(steps.count) frame(s) of a session taken over could not be stored: \(error)")
      }
    }
    if !queued { log.error("\(steps.count) frame(s) of a session taken over are lost: the sender is full") }
  }

  /// Answers to relayed candidates whose events are stored here: handed to the hub from the
  /// sender, behind every Redis step queued before them, so that an answer whose copies went to
  /// sessions held elsewhere (the event's `deliver` steps, or frames sent on as `unheld`) is
  /// written only once those are stored. If the sender takes no more, the answers' sessions close
  /// instead (never an answer before its copies): each client resumes and sends its candidates
  /// again.
  ///
  /// A job of the sender with nothing queued behind it hands them over itself (`onSender`): every
  /// step queued before them has run then (the sender runs one job at a time, and the steps an
  /// answer waits for were queued before it was due), so a job of their own would only add a
  /// hand-off to the sender per batch (docs/benchmarks.md, "Item 4, thirteenth step").
  private func answer(_ answers: [WriteBehindHolder.UnstoredAnswer], onSender: Bool) {
    if onSender, sender.queued == 0 {
      inbox.current?.receive(.answersUnstored(answers))
      return
    }
    let inbox = inbox
    guard !sender.submit({ _ in inbox.current?.receive(.answersUnstored(answers)) }) else { return }
    let sessions = Set(answers.map(\.session)).sorted()
    log.error(
      "\(answers.count) answer(s) to relayed candidates cannot be sent: the sender is full; their sessions close")
    inbox.current?.receive(.sessionsBroken(sessions))
  }

  private func store(_ batch: WriteBehindBatch) {
    let (node, limits) = (node, limits)
    let queued = sender.submit { [weak self] connection in
      guard let self else { return }
      do throws(RedisError) {
        guard let connection else { throw RedisError.connectionFailed(message: "not connected") }
        let refused: [String: WriteBehindBatch.Refusal]
        if let logStore = self.logStore {
          refused = try logStore.store(batch, on: connection, held: { [weak self] in self?.holds($0) ?? false })
        } else {
          refused = try WriteBehindStore(connection, limits: limits).store(batch, from: node)
        }
        if !refused.isEmpty {
          // (Also when the holder ignores the answer: a batch sent before its lease went stale.)
          log.warning(
            "Redis refused a batch's frames for \(refused.count) session(s) "
              + "(\(refused.values.filter { $0 == .superseded }.count) taken by another node)")
        }
        state.withLock { $0.outbox += $0.holder.batchStored(batch.number, refused: refused, now: now()) }
      } catch {
        log.error("a batch of \(batch.frameCount) frame(s) could not be stored (\(error)): sent again")
        state.withLock { $0.outbox += $0.holder.batchFailed(batch.number, now: now()) }
      }
      pump(onSender: true)
    }
    if !queued {
      state.withLock { $0.outbox += $0.holder.batchFailed(batch.number, now: now()) }
    }
  }
}
