/// What a holder keeps of its own node log (`WriteBehindLog`) to append and trim it
/// (docs/architecture.md, write-behind point 7): per stripe the take count it appends under and
/// its entries' numbers with, per session, the last seq and letter position each holds; per
/// session the seq its client acknowledged; and the sessions the log said were taken. A pure
/// value, so that when a trim may drop an entry is tested without Redis (`WriteBehindLogStore`
/// runs it).
package struct WriteBehindLogBook: Sendable {
  /// What one appended entry holds of a session: enough to know when its client has it all and
  /// what the trim's checkpoint must say then.
  package struct Mark: Sendable, Equatable {
    package var last: UInt64
    package var letterPosition: String?
  }

  package struct Entry: Sendable, Equatable {
    package let number: UInt64
    package let sessions: [String: Mark]
    /// Its relayed copies' once-keys, in log order: a trim keeps them (`WriteBehindLogTrimmed`).
    package let onces: [WriteBehindLogTrimmed.Onces.Pair]
  }

  package struct Stripe: Sendable, Equatable {
    /// The take count (`gen`) appends and trims go under: a take since makes Redis refuse them.
    package var takes: UInt64 = 0
    /// The entries appended and not yet trimmed, oldest first.
    package var entries: [Entry] = []
  }

  /// A trim to run: drop the stripe's entries before `keepFrom`, writing these checkpoints and
  /// once-keys (`WriteBehindLog.trim`).
  package struct Trim: Sendable, Equatable {
    package let stripe: Int
    package let keepFrom: UInt64
    package let takes: UInt64
    package let checkpoints: [String: WriteBehindLogTrimmed.Checkpoint]
    package let onces: WriteBehindLogTrimmed.Onces
  }

  package private(set) var stripes: [Int: Stripe] = [:]
  /// The seq each session's client acknowledged (held sessions only: `forget`).
  private var acknowledged: [String: UInt64] = [:]
  /// The checkpoint each session's trimmed entries left, so that a later trim that drops only
  /// frames without a letter keeps the letter position an earlier one wrote.
  private var checkpoints: [String: WriteBehindLogTrimmed.Checkpoint] = [:]
  /// Sessions the log said were taken (a refused append or trim), with their takers' epochs:
  /// once an append under the new take count succeeds Redis no longer refuses this node's
  /// frames for them, so every later batch is checked here (`superseded`) until the holder
  /// drops them.
  package private(set) var taken: [String: UInt64] = [:]
  /// Sessions that ended here while entries still held frames of theirs: nobody takes them, so a
  /// trim dropping those entries writes neither their checkpoint nor their once-keys (the end
  /// released the checkpoint; written again, it would stay as long as the stripe lives).
  private var ended: Set<String> = []

  package init() {}

  package func takes(of stripe: Int) -> UInt64 { stripes[stripe]?.takes ?? 0 }

  /// Whether frames of `session` under `epoch` must be dropped: a take at a later epoch happened.
  package func superseded(_ session: String, epoch: UInt64) -> Bool {
    taken[session].map { $0 > epoch } ?? false
  }

  /// Redis stored `entry` as the stripe's entry `number`.
  package mutating func appended(_ entry: WriteBehindLogEntry, stripe: Int, number: UInt64) {
    var sessions: [String: Mark] = [:]
    var onces: [WriteBehindLogTrimmed.Onces.Pair] = []
    for frame in entry.frames {
      var mark = sessions[frame.session] ?? Mark(last: frame.seq, letterPosition: nil)
      mark.last = max(mark.last, frame.seq)
      if let position = frame.letterPosition { mark.letterPosition = position }
      sessions[frame.session] = mark
      if let once = frame.once { onces.append(.init(session: frame.session, once: once)) }
    }
    stripes[stripe, default: Stripe()].entries.append(Entry(number: number, sessions: sessions, onces: onces))
  }

  /// Redis refused an append or trim: sessions were taken since the take count given.
  package mutating func refused(stripe: Int, takes: UInt64, taken: [String: UInt64]) {
    stripes[stripe, default: Stripe()].takes = max(self.takes(of: stripe), takes)
    for (session, epoch) in taken { self.taken[session] = max(self.taken[session] ?? 0, epoch) }
  }

  /// The session's client acknowledged everything through `seq`.
  package mutating func acknowledge(_ session: String, through seq: UInt64) {
    acknowledged[session] = max(acknowledged[session] ?? 0, seq)
  }

  /// The session is not held here any more (dropped, ended, moved): its frames no longer keep
  /// an entry, and a later trim writes their checkpoint.
  package mutating func forget(_ session: String) {
    acknowledged[session] = nil
    checkpoints[session] = nil
    taken[session] = nil
  }

  /// The session ended here (`WriteBehindLogStore.ended`): forgotten, and no trim keeps anything of it.
  package mutating func end(_ session: String) {
    forget(session)
    if stripes.values.contains(where: { $0.entries.contains { $0.sessions[session] != nil } }) {
      ended.insert(session)
    }
  }

  /// Forgets the sessions `keep` says are no longer held (called on the rare refusal, so that
  /// `taken` stays bounded by the sessions held).
  package mutating func forgetTaken(keeping keep: (String) -> Bool) {
    taken = taken.filter { keep($0.key) }
  }

  /// The trims due: per stripe whose oldest entries hold only acknowledged frames (or frames of
  /// sessions no longer held: `held`), up to the first entry holding a frame its client has not
  /// acknowledged. One trim per stripe, whatever sessions it covers. A stripe whose oldest entry
  /// waits for an acknowledgement gets a trim that drops nothing: the trim renews its keys'
  /// expiry, which an append sets only on an empty log, so that a silent client does not let the
  /// stripe (its entries and its fence's `head`, which numbers them) expire under the node.
  package func trims(held: (String) -> Bool) -> [Trim] {
    var trims: [Trim] = []
    for (stripe, state) in stripes.sorted(by: { $0.key < $1.key }) {
      let done = state.entries.prefix { entry in
        entry.sessions.allSatisfy { session, mark in
          !held(session) || (acknowledged[session].map { $0 >= mark.last } ?? false)
        }
      }
      guard let newest = done.last else {
        if let oldest = state.entries.first {
          trims.append(
            Trim(stripe: stripe, keepFrom: oldest.number, takes: state.takes, checkpoints: [:], onces: .init([])))
        }
        continue
      }
      var checkpoints: [String: WriteBehindLogTrimmed.Checkpoint] = [:]
      var onces: [WriteBehindLogTrimmed.Onces.Pair] = []
      for entry in done {
        for (session, mark) in entry.sessions where !ended.contains(session) {
          let before = checkpoints[session] ?? self.checkpoints[session]
          checkpoints[session] = .init(
            last: max(before?.last ?? 0, mark.last), letterPosition: mark.letterPosition ?? before?.letterPosition)
        }
        onces += entry.onces.filter { !ended.contains($0.session) }
      }
      trims.append(
        Trim(
          stripe: stripe, keepFrom: newest.number + 1, takes: state.takes, checkpoints: checkpoints,
          onces: .init(onces)))
    }
    return trims
  }

  /// Redis trimmed the stripe: its first entry is now `head`. The checkpoints `trim` wrote are
  /// remembered for the next trim of the same sessions. How many entries it dropped.
  @discardableResult
  package mutating func trimmed(_ trim: Trim, head: UInt64) -> Int {
    let before = stripes[trim.stripe]?.entries.count ?? 0
    stripes[trim.stripe]?.entries.removeAll { $0.number < head }
    for (session, checkpoint) in trim.checkpoints where acknowledged[session] != nil {
      checkpoints[session] = checkpoint
    }
    if !ended.isEmpty { ended.formIntersection(sessionsKept) }
    return before - (stripes[trim.stripe]?.entries.count ?? 0)
  }

  /// The sessions the entries kept hold frames of.
  package var sessionsKept: Set<String> {
    var sessions: Set<String> = []
    for stripe in stripes.values {
      for entry in stripe.entries { sessions.formUnion(entry.sessions.keys) }
    }
    return sessions
  }

  /// Entries appended and not trimmed, over every stripe (tests, `/metrics`).
  package var entryCount: Int { stripes.values.reduce(0) { $0 + $1.entries.count } }
}
