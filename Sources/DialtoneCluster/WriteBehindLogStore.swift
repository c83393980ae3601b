import DialtoneRedis
import DialtoneSupport

/// Stores a write-behind holder's batches in the node's own log (`WriteBehindLog`, docs/
/// architecture.md write-behind point 7) instead of each session's keys (`WriteBehindStore`):
/// one append per stripe the batch touches, whatever sessions it holds, and one trim per stripe
/// once the clients acknowledged its oldest entries. A session taken by another node (the log
/// refuses the append and names it) is refused `.superseded`, as `WriteBehindStore` refuses a
/// session whose epoch moved, and the rest of the stripe's frames are appended again under the
/// new take count.
///
/// A resume reads it (`resume`: the take, the re-store, the settle), and a session's end releases
/// what its stripe keeps of it (`ended`). Switched on by `ClusterLink.Settings.logStripes`.
/// Blocking calls: run them off the cooperative pool (the link's sender and housekeeping).
package final class WriteBehindLogStore: Sendable {
  private let node: String
  package let stripes: Int
  private let expiry: Duration
  private let book = Locked(WriteBehindLogBook())

  package init(node: String, stripes: Int, expiry: Duration) {
    self.node = node
    self.stripes = max(1, stripes)
    self.expiry = expiry
  }

  private func log(_ redis: any RedisClient) -> WriteBehindLog {
    WriteBehindLog(redis, stripes: stripes, expiry: expiry)
  }

  /// A refusal names every session taken and not released, also taken long ago: this many
  /// appends again at most, each after a take that happened meanwhile.
  private static let maxAttempts = 8

  /// Appends `batch` per stripe; the sessions refused (taken by another node since this node won
  /// them). `held`: whether this node still holds a session (to forget old takes).
  package func store(_ batch: WriteBehindBatch, on redis: any RedisClient, held: (String) -> Bool)
    throws(RedisError) -> [String: WriteBehindBatch.Refusal]
  {
    let log = log(redis)
    var refused: [String: WriteBehindBatch.Refusal] = [:]
    var entries: [Int: WriteBehindLogEntry] = [:]
    book.withLock { book in
      for session in batch.sessions where !session.frames.isEmpty {
        if book.superseded(session.id, epoch: session.epoch) {
          refused[session.id] = .superseded
          continue
        }
        let last = session.frames.count - 1
        let frames = session.frames.enumerated().map { index, frame in
          WriteBehindLogEntry.Frame(
            session: session.id, epoch: session.epoch, seq: frame.seq, bytes: frame.bytes, once: frame.once,
            requestID: frame.requestID, letterPosition: index == last ? session.letterPosition : nil)
        }
        entries[log.stripe(of: session.id), default: WriteBehindLogEntry(frames: [])].frames += frames
      }
    }
    // Every stripe's append in one round trip (a pipeline); the refused go again, together,
    // under the take counts their refusals taught.
    var pending = entries.sorted(by: { $0.key < $1.key }).map { (stripe: $0.key, entry: $0.value) }
    var attempts = 0
    while !pending.isEmpty {
      attempts += 1
      let takes = book.withLock { book in pending.map { book.takes(of: $0.stripe) } }
      var commands: [[RedisArgument]] = []
      commands.reserveCapacity(pending.count)
      for (append, since) in zip(pending, takes) {
        commands.append(try log.appendCommand(append.entry, node: node, stripe: append.stripe, takes: since))
      }
      let replies = try redis.pipeline(commands)
      guard replies.count == pending.count else { throw .unexpectedReply(.array(replies)) }
      var again: [(stripe: Int, entry: WriteBehindLogEntry)] = []
      var failure: RedisError?
      for ((append, since), reply) in zip(zip(pending, takes), replies) {
        let appended: WriteBehindLog.Appended
        do throws(RedisError) {
          if case .error(prefix: "NOSCRIPT", _) = reply {
            // A Redis that lost its scripts since the link loaded them: EVAL, which caches it.
            appended = try log.append(append.entry, node: node, stripe: append.stripe, takes: since)
          } else {
            appended = try WriteBehindLog.appended(reply)
          }
        } catch {
          // The stripes appended beside it stay appended (a batch stored again keeps one frame
          // per seq at a take); this one fails the batch, as a failed round trip did.
          failure = failure ?? error
          continue
        }
        var entry = append.entry
        switch appended {
        case .appended(let number):
          book.withLock { $0.appended(entry, stripe: append.stripe, number: number) }
        case .refused(let takes, let taken):
          // Old takes of sessions no longer held here are forgotten (`held` is asked outside the
          // book's lock: it takes the shell's).
          let remembered = book.withLock { Array($0.taken.keys) }
          let gone = Set(remembered.filter { taken[$0] == nil && !held($0) })
          book.withLock { book in
            book.refused(stripe: append.stripe, takes: takes, taken: taken)
            book.forgetTaken { !gone.contains($0) }
            entry.frames.removeAll { frame in
              guard book.superseded(frame.session, epoch: frame.epoch) else { return false }
              refused[frame.session] = .superseded
              return true
            }
          }
          if !entry.frames.isEmpty { again.append((append.stripe, entry)) }
        }
      }
      if let failure { throw failure }
      guard again.isEmpty || attempts < Self.maxAttempts else {
        throw .invalidRequest("the node log refused \(attempts) appends in a row: takes keep coming")
      }
      pending = again
    }
    return refused
  }

  /// The session's client acknowledged everything through `seq`.
  package func acknowledge(_ session: String, through seq: UInt64) {
    book.withLock { $0.acknowledge(session, through: seq) }
  }

  /// The session is no longer held here: its frames keep no entry.
  package func forget(_ session: String) { book.withLock { $0.forget(session) } }

  /// Runs the trims due (one per stripe whose oldest entries are all acknowledged); how many
  /// entries they dropped. A trim refused for a take is left for the next append to learn of.
  @discardableResult
  package func trim(on redis: any RedisClient, held: (String) -> Bool) throws(RedisError) -> Int {
    let log = log(redis)
    // `held` is asked outside the book's lock: it takes the shell's.
    let sessions = book.withLock { $0.sessionsKept }
    let kept = Set(sessions.filter(held))
    let trims = book.withLock { $0.trims(held: kept.contains) }
    var dropped = 0
    for trim in trims {
      let result = try log.trim(
        node: node, stripe: trim.stripe, keepFrom: trim.keepFrom, takes: trim.takes, checkpoints: trim.checkpoints,
        onces: trim.onces)
      guard case .trimmed(let head) = result else { continue }
      dropped += book.withLock { $0.trimmed(trim, head: head) }
    }
    return dropped
  }

  // MARK: Resume and release (docs/architecture.md, write-behind point 7, "The orders")

  package enum Resumed: Sendable, Equatable {
    /// Taken, re-stored here and settled: hold the session with this.
    case resumed(SessionLedger.HeldResumption)
    /// Nothing replays what the client lacks: the session ends, the client resyncs.
    case resync
    /// A later resume took the session meanwhile (a take refused, or this node's re-store):
    /// this one is superseded.
    case superseded
  }

  /// A resume with the node log, after the resume script moved the session's epoch to
  /// `resumed.epoch`: takes the session from the log of the holder named by `from` and from the
  /// previous owner's (the same node, usually; two when a resume before this one had not
  /// re-stored: R1 and R2 racing, or R1 dead), decides replay or going on
  /// (`WriteBehindLogResume`), re-stores in this node's log what the client has not processed,
  /// then settles the meta (`last`, `from` cleared, the once-keys) and releases the takes'
  /// markers. `client`: the client's `lastSeq`; `ahead`: how far past every store it may be.
  package func resume(
    _ session: String, _ resumed: SessionLedger.HeldResumption, client: UInt64, ahead: UInt64, capacity: Int,
    ledger: SessionLedger
  ) throws(RedisError) -> Resumed {
    guard let logged = resumed.logged else { return .resumed(resumed) }
    let log = log(ledger.redis)
    var nodes: [String] = []
    if let from = logged.from { nodes.append(from.node) }
    if let owner = logged.previousOwner, !nodes.contains(owner) { nodes.append(owner) }
    var takes: [String: WriteBehindLogTaken] = [:]
    for node in nodes {
      do {
        switch try log.take(session, epoch: resumed.epoch, from: node) {
        case .taken(let taken): takes[node] = taken
        case .refused: return .superseded
        }
      } catch let error as RedisError {
        throw error
      } catch {
        // A malformed entry (the take happened): what the log held cannot be read back.
        try release(session, epoch: resumed.epoch, from: nodes, log)
        return .resync
      }
    }
    switch WriteBehindLogResume.decide(session, resumed, takes: takes, client: client, ahead: ahead, capacity: capacity)
    {
    case .resync:
      try release(session, epoch: resumed.epoch, from: nodes, log)
      return .resync
    case .resumed(let held, let restore, let settle):
      if !restore.isEmpty {
        let frames = restore.map {
          WriteBehindBatch.Frame(seq: $0.seq, bytes: $0.bytes, requestID: $0.requestID, once: $0.once)
        }
        let batch = WriteBehindBatch(number: 0, sessions: [.init(id: session, epoch: resumed.epoch, frames: frames)])
        // Refused only when another node took the session from this one since the take above.
        guard try store(batch, on: ledger.redis, held: { _ in true }).isEmpty else { return .superseded }
      }
      // Another resume moved the epoch since this one's script: it has the session (it takes from
      // this node's log what was just re-stored), and holding it here would only be refused later.
      guard try ledger.settleLogged(session, settle) else { return .superseded }
      try release(session, epoch: resumed.epoch, from: nodes, log)
      return .resumed(held)
    }
  }

  /// Lets the takes' markers go (a marker of a later taker stays).
  private func release(_ session: String, epoch: UInt64, from nodes: [String], _ log: WriteBehindLog)
    throws(RedisError)
  {
    for node in nodes { try log.release(session, epoch: epoch, from: node) }
  }

  /// The session ended here (`ClusterLink.end`): its checkpoint in this node's stripe goes, and
  /// its entries need no keeping (a later taker's marker stays).
  package func ended(_ session: String, epoch: UInt64, on redis: any RedisClient) throws(RedisError) {
    book.withLock { $0.end(session) }
    try log(redis).release(session, epoch: epoch, from: node)
  }

  /// Entries appended and not yet trimmed (tests, `/metrics`).
  package var entriesKept: Int { book.withLock { $0.entryCount } }
}
