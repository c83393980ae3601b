/// What a write-behind holder (`WriteBehindHolder`) hands to Redis in one round trip
/// (`WriteBehindStore`): the frames it numbered since its last batch, grouped by session, each
/// session's under the epoch the holder won for it, with the position of its last letter.
package struct WriteBehindBatch: Sendable, Equatable {
  /// A message the holder numbered. `requestID`: the request it answers, remembered with it in
  /// Redis so that the request repeated after a resume gets the same answer (protocol.md §5.3).
  package struct Frame: Sendable, Equatable {
    package let seq: UInt64
    package let bytes: [UInt8]
    package let requestID: String?
    /// Its once-key (`OnceKey`), remembered with it in Redis: a copy another node sends the
    /// session later is refused there (`SessionLedger`'s append step), and whoever holds the
    /// session next loads it (`WriteBehindStore.claim`).
    package let once: String?

    package init(seq: UInt64, bytes: [UInt8], requestID: String? = nil, once: String? = nil) {
      self.seq = seq
      self.bytes = bytes
      self.requestID = requestID
      self.once = once
    }
  }

  /// One session's part: consecutive seqs, in order.
  package struct Session: Sendable, Equatable {
    package let id: String
    package let epoch: UInt64
    package var frames: [Frame]
    /// The inbox position of the last letter among its frames (nil: none), stored with them in
    /// the session (`lp`): whoever resumes the session applies the holder's letters for it after
    /// this one (`SessionLedger.resumeHolding`). Letters are numbered in inbox order per session.
    package var letterPosition: String?

    package init(id: String, epoch: UInt64, frames: [Frame], letterPosition: String? = nil) {
      self.id = id
      self.epoch = epoch
      self.frames = frames
      self.letterPosition = letterPosition
    }
  }

  /// Counts the holder's batches, so that a result is matched to the batch it answers.
  package let number: UInt64
  package var sessions: [Session]
  /// What sent it (counted in `/metrics`: how full batches are, and why); part of its value
  /// like the rest (two batches cut for different reasons are not the same holder output).
  package let cut: Cut

  package init(number: UInt64, sessions: [Session], cut: Cut = .window) {
    self.number = number
    self.sessions = sessions
    self.cut = cut
  }

  /// Why the holder sent a batch when it did.
  package enum Cut: String, Sendable, Equatable {
    /// Its oldest event had waited the batch window (zero: at once, a frame that may wait).
    case window
    /// A frame that may not wait (an invite's, an accept's, an answer's) was queued.
    case urgent
    /// The queue held a batch's worth of frames.
    case full
  }

  package var frameCount: Int { sessions.reduce(0) { $0 + $1.frames.count } }

  /// Why Redis refused a session's frames (the others of the batch are stored).
  package enum Refusal: Sendable, Equatable {
    /// The session's epoch is another: another node opened or resumed it since.
    case superseded
    /// The first frame's seq does not follow the last one stored: a frame is missing.
    case gap
    /// No such session (it ended or expired).
    case gone
  }
}
