import DialtoneProtocol

/// Where finished group calls are kept, with every member's part in them.
public protocol GroupCallStore: Sendable {
  func saveGroupCall(_ record: GroupCallRecord) async throws
  /// The group calls `userId` was a member of, newest first, strictly older than `cursor`.
  func groupHistory(of userId: String, limit: Int, before cursor: HistoryCursor?) async throws -> [GroupCallRecord]
}
