/// The once-keys (`OnceKey`) a write-behind holder has numbered for one session, so that a ring
/// reaching the session twice is numbered once, as `SessionLedger.append(once:)` does for a
/// store-first session. Bounded like the ledger's (`SessionLedger.Limits.onceMemory`: the oldest
/// go first). Keys are kept as their hashes: a candidate's key holds its whole ICE line, and a
/// node holds thousands of sessions; two keys of one session sharing a 64-bit hash is far rarer
/// than anything else that loses a message.
package struct WriteBehindOnces: Sendable, Equatable {
  private var order: [Int] = []
  private var known: Set<Int> = []
  private let capacity: Int

  package init(capacity: Int, keys: [String] = []) {
    self.capacity = max(1, capacity)
    for key in keys { _ = insert(key) }
  }

  /// Remembers the key; false when it was known already (the message is a repeat).
  package mutating func insert(_ key: String) -> Bool {
    let hash = key.hashValue
    guard known.insert(hash).inserted else { return false }
    order.append(hash)
    if order.count > capacity {
      known.remove(order.removeFirst())
    }
    return true
  }

  /// Every key of `other` too (a session held again here keeps what it had numbered).
  package mutating func formUnion(_ other: WriteBehindOnces) {
    for hash in other.order where known.insert(hash).inserted {
      order.append(hash)
      if order.count > capacity { known.remove(order.removeFirst()) }
    }
  }
}
