/// What a trim of the node log (`WriteBehindLog.trim`) keeps of the entries it drops, so that a
/// session whose frames were acknowledged and trimmed still resumes right: its checkpoint (the
/// last seq and letter position its trimmed frames held) and their once-keys (a copy sent again
/// after a resume, its sender not having been answered, is still refused; the recipient's client
/// acknowledging the first copy does not make its sender stop).
package enum WriteBehindLogTrimmed {
  /// A session's state as its trimmed frames left it, "last" or "last letterPosition" in the
  /// stripe's checkpoints hash.
  package struct Checkpoint: Sendable, Equatable {
    package let last: UInt64
    package let letterPosition: String?

    package init(last: UInt64, letterPosition: String?) {
      self.last = last
      self.letterPosition = letterPosition
    }

    package var text: String { letterPosition.map { "\(last) \($0)" } ?? String(last) }

    package init(text: String) throws(WriteBehindLogMalformed) {
      let parts = text.split(separator: " ", omittingEmptySubsequences: false)
      guard (1...2).contains(parts.count), let last = UInt64(parts[0]), parts.count == 1 || !parts[1].isEmpty
      else { throw .badCheckpoint(text) }
      self.init(last: last, letterPosition: parts.count == 2 ? String(parts[1]) : nil)
    }
  }

  /// One trim's once-keys, session and once-key pairs in log order, packed by the node into one
  /// list element (`WriteBehindLogWriter`'s strings).
  package struct Onces: Sendable, Equatable {
    package struct Pair: Sendable, Equatable {
      package let session: String
      package let once: String

      package init(session: String, once: String) {
        self.session = session
        self.once = once
      }
    }

    package let pairs: [Pair]

    package init(_ pairs: [Pair]) { self.pairs = pairs }

    package func encoded() -> [UInt8] {
      var writer = WriteBehindLogWriter()
      for pair in pairs {
        writer.text(pair.session)
        writer.text(pair.once)
      }
      return writer.bytes
    }

    package init(decoding bytes: [UInt8]) throws(WriteBehindLogMalformed) {
      var reader = WriteBehindLogReader(bytes)
      var pairs: [Pair] = []
      while !reader.isAtEnd { pairs.append(Pair(session: try reader.text(), once: try reader.text())) }
      self.pairs = pairs
    }
  }
}
