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
/// Not yet read by a resume (`SessionLedger.resumeHolding` still reads the session's keys):
/// switched on by `ClusterLink.Settings.logStripes` for measurement only. Blocking calls: run
/// them off the cooperative pool (the link's sender and housekeeping).
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

  /// Entries appended and not yet trimmed (tests, `/metrics`).
  package var entriesKept: Int { book.withLock { $0.entryCount } }
}
