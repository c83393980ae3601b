import DialtoneSupport

/// Acknowledgements from clients, held until the node's housekeeping stores them all in one
/// round trip a heartbeat (`ClusterLink.storeAcknowledgements`). An acknowledgement only lets
/// Redis forget messages the client has: storing it late keeps them a little longer (a resume
/// skips them by the client's seq), storing it never costs memory until the session expires. So
/// a relayed message pays no Redis write of its own for its ack, and the acks of a session that
/// acknowledges every message collapse into one. Bounded: one entry per session; past
/// `maxSessions` the caller stores them at once.
package final class PendingAcknowledgements: Sendable {
  package static let maxSessions = 100_000
  private let through = Locked<[String: UInt64]>([:])

  package init() {}

  /// Remembers that the session's client has everything through `seq`. Whether so many sessions
  /// wait that they should be stored now.
  package func note(_ sessionID: String, through seq: UInt64) -> Bool {
    through.withLock { through in
      through[sessionID] = max(through[sessionID] ?? 0, seq)
      return through.count >= Self.maxSessions
    }
  }

  /// Every session's latest acknowledgement, in session order, leaving none.
  package func take() -> [(session: String, through: UInt64)] {
    let taken = through.withLock { through in
      defer { through.removeAll(keepingCapacity: true) }
      return through
    }
    return taken.sorted { $0.key < $1.key }.map { (session: $0.key, through: $0.value) }
  }

  /// Puts back what could not be stored (a later acknowledgement of the same session wins).
  package func restore(_ pending: [(session: String, through: UInt64)]) {
    through.withLock { through in
      for (session, seq) in pending where through.count < Self.maxSessions || through[session] != nil {
        through[session] = max(through[session] ?? 0, seq)
      }
    }
  }

  /// A session that ended needs none.
  package func forget(_ sessionID: String) { through.withLock { _ = $0.removeValue(forKey: sessionID) } }

  package var isEmpty: Bool { through.withLock { $0.isEmpty } }
}
