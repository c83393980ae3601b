import DialtoneProtocol

/// Where finished group calls are read from, with every member's part in them (written by
/// `CallJournal`, like the 1:1 history).
public protocol GroupCallStore: Sendable {
  /// The group calls `userId` was a member of, newest first, strictly older than `cursor`.
  func groupHistory(of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory)
    async throws -> [GroupCallRecord]
}

extension GroupCallStore {
  public func groupHistory(of userId: String, limit: Int, before cursor: HistoryCursor?) async throws
    -> [GroupCallRecord]
  {
    try await groupHistory(of: userId, limit: limit, before: cursor, blocked: .hide)
  }
}
