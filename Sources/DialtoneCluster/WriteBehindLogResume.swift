/// What a resume with the node log decides once it took the session from the logs that hold it
/// (docs/architecture.md, write-behind point 7, "What a resume reads"): the resume script moved
/// the epoch and copied the previous holder's letters but decided nothing from the meta's `last`,
/// which the holders' logs may be past. A pure value, so that the rules are tested without Redis
/// (`WriteBehindLogStore.resume` runs it).
package struct WriteBehindLogResume: Sendable, Equatable {
  package enum Outcome: Sendable, Equatable {
    /// Resumed: the script's answer as the holder takes it (`lastSeq` the last seq stored or the
    /// client's, `pending` the frames to replay, the letters after the previous holder's stored
    /// ones), what to re-store in this node's log under its epoch, and what to write to the meta.
    case resumed(SessionLedger.HeldResumption, restore: [WriteBehindLogEntry.Frame], settle: Settle)
    /// Nothing can replay what the client lacks (behind `dropped`, ahead of every store by more
    /// than the bound, a hole, letters lost by count, or more than the session holds).
    case resync
  }

  /// The meta's side of a resume once the resumer's log holds what it took
  /// (`SessionLedger.settleLogged`): `last`, `dropped` if it moved (the session goes on from the
  /// client's seq, ahead of every store), `from` to clear if still that, the once-keys to keep.
  package struct Settle: Sendable, Equatable {
    package let epoch: UInt64
    package let last: UInt64
    package let dropped: UInt64?
    package let from: String?
    package let onces: [String]
    /// The copy (in this node's inbox) of the last letter dropped as stored already, as the
    /// session's `lp`: its next resume reads the copies after it only (nil: none dropped).
    package let letterPosition: String?
  }

  /// `session`'s resume; `resumed`: the script's answer (`SessionLedger.resumeHolding` with `logged`); `takes`: what
  /// each node's log held for the session (the `from` holder's and the previous owner's, either
  /// may be missing); `client`: the client's `lastSeq`; `ahead`: how far past every store the
  /// client may be (the holder's `maxSessionFrames`); `capacity`: the session's.
  package static func decide(
    _ session: String, _ resumed: SessionLedger.HeldResumption, takes: [String: WriteBehindLogTaken], client: UInt64,
    ahead: UInt64,
    capacity: Int
  ) -> Outcome {
    guard let logged = resumed.logged, client >= logged.dropped else { return .resync }
    // One frame per seq after the client's: the log's, the higher epoch's where two logs or two
    // epochs hold a seq; a frame Redis numbered itself (store-first, before a claim) where no log
    // holds that seq. Two different frames at a seq mean Redis numbered past a full inbox over
    // the holder's seqs: the client resyncs rather than read one seq as two frames.
    var bySeq: [UInt64: (frame: WriteBehindLogEntry.Frame?, bytes: [UInt8])] = [:]
    for stored in resumed.pending where stored.seq > client { bySeq[stored.seq] = (nil, stored.bytes) }
    var last = resumed.lastSeq
    for taken in takes.values {
      last = max(last, taken.last ?? 0)
      for frame in taken.frames where frame.seq > client {
        switch bySeq[frame.seq] {
        case nil: bySeq[frame.seq] = (frame, frame.bytes)
        case (nil, let bytes)?:
          guard bytes == frame.bytes else { return .resync }
          bySeq[frame.seq] = (frame, frame.bytes)
        case (let kept?, _)?:
          if frame.epoch > kept.epoch { bySeq[frame.seq] = (frame, frame.bytes) }
        }
      }
    }
    var dropped: UInt64?
    if client > last {
      // The holder wrote candidates it had not stored, and died: the client has them, so the
      // session goes on from its seq, within the holder's bound; below it nothing replays.
      guard client - last <= ahead else { return .resync }
      (last, dropped) = (client, client)
    }
    let pending = bySeq.filter { $0.key <= last }.sorted { $0.key < $1.key }
    guard pending.count == Int(last - client), pending.first.map({ $0.key == client + 1 }) ?? true else {
      return .resync
    }
    // The letters the previous holder stored are in its log (its take's letter position): those
    // at or before it are dropped; letters its index lost by count must be among them.
    let stored = logged.previousOwner.flatMap { takes[$0]?.letterPosition }.flatMap(InboxPosition.init)
    if let cut = logged.letterCut.flatMap(InboxPosition.init), stored.map({ $0 < cut }) ?? true { return .resync }
    // (In inbox order: those dropped come first, and their copies too.)
    let keep = resumed.origins.indices.filter { index in
      guard let stored, let origin = InboxPosition(resumed.origins[index]) else { return true }
      return origin > stored
    }
    guard keep.count + pending.count <= capacity else { return .resync }
    // The logs' once-keys join the session's own (kept there by `settle` for later resumes).
    var seen = Set(resumed.onces)
    var added: [String] = []
    var replies = resumed.replies
    for node in takes.keys.sorted() {
      guard let taken = takes[node] else { continue }
      for once in taken.onces where seen.insert(once).inserted { added.append(once) }
      replies.merge(taken.replies) { kept, _ in kept }
    }
    let held = SessionLedger.HeldResumption(
      lastSeq: last, epoch: resumed.epoch,
      pending: pending.map { SessionLedger.Stored(sessionID: session, seq: $0.key, bytes: $0.value.bytes) },
      replies: replies, letters: keep.map { resumed.letters[$0] }, positions: keep.map { resumed.positions[$0] },
      origins: keep.map { resumed.origins[$0] }, lettersAfter: resumed.lettersAfter, onces: resumed.onces + added,
      logged: resumed.logged)
    // What this node's log must hold for the session's next resume: the frames the client has not
    // processed that only a log held (Redis's own are in the session's keys), under this epoch.
    let restore = pending.compactMap { seq, value in
      value.frame.map { frame in
        WriteBehindLogEntry.Frame(
          session: frame.session, epoch: resumed.epoch, seq: seq, bytes: frame.bytes, once: frame.once,
          requestID: frame.requestID)
      }
    }
    let from = logged.from.map { "\($0.node) \($0.epoch)" }
    return .resumed(
      held, restore: restore,
      settle: Settle(
        epoch: resumed.epoch, last: last, dropped: dropped, from: from, onces: added,
        letterPosition: resumed.positions.indices.filter { !keep.contains($0) }.last.map { resumed.positions[$0] }))
  }
}
