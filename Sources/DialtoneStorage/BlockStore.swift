import DialtoneProtocol

/// Whether a blocker's history lists the calls their block silenced (`--blocked-calls-in-history`),
/// marked `blocked: true`; the blocked caller's own history lists them either way, unmarked.
/// What adding a block came to.
public enum BlockResult: Sendable, Equatable {
  case added
  case alreadyBlocked
  case limitReached
}

public enum BlockedCallsInHistory: String, Sendable, CaseIterable {
  case hide, show
}

/// Who blocks whom: a user's blocks silence every call from the blocked user (`/v1/blocks`).
public protocol BlockStore: Sendable {
  /// The users `userId` blocks, oldest block first.
  func blocks(of userId: String) async throws -> [BlockedUser]
  /// Every block (blocker, blocked), read once at start to fill the hub's table.
  func allBlocks() async throws -> [(userId: String, blockedId: String)]
  /// Adds the block unless `userId` already blocks `limit` others; a block already there is kept
  /// (with its time) whatever the limit. One step, so concurrent requests cannot pass the limit.
  func block(_ blockedId: String, by userId: String, at milliseconds: Int64, limit: Int) async throws -> BlockResult
  /// Removes the block; false when there was none.
  func unblock(_ blockedId: String, by userId: String) async throws -> Bool
}
