/// Who blocks whom, as the hub checks it on every invite (the store is the record; this is read
/// once at start and then kept in step by `/v1/blocks`). Bounded by `ServerLimits.maxBlocksPerUser`
/// per user.
package struct BlockTable: Sendable {
  private var blockedBy: [String: Set<String>] = [:]

  package init(_ pairs: [(userId: String, blockedId: String)] = []) {
    for pair in pairs { blockedBy[pair.userId, default: []].insert(pair.blockedId) }
  }

  package func blocks(_ userId: String, _ other: String) -> Bool { blockedBy[userId]?.contains(other) == true }

  package mutating func set(_ userId: String, blocks other: String, _ on: Bool) {
    if on {
      blockedBy[userId, default: []].insert(other)
    } else {
      blockedBy[userId]?.remove(other)
      if blockedBy[userId]?.isEmpty == true { blockedBy[userId] = nil }
    }
  }
}
