import DialtoneProtocol

/// A user's phone-number directory (protocol.md §14.10): numbers to label and numbers to block,
/// uploaded whole by the app's backend and fetched by devices whole or as the changes since the
/// version they have.
public protocol DirectoryStore: Sendable {
  /// Replaces the user's lists; the version moves on only when something changed.
  func replaceDirectory(of userId: String, identify: [Int64: String], block: Set<Int64>) async throws
    -> DirectoryUploadResponse
  /// The lists as of now: whole when `since` is nil, newer than what the store can tell
  /// changes from, or ahead of the current version; otherwise the changes since `since`.
  func directory(of userId: String, since: Int64?) async throws -> DirectoryResponse
}

/// What a run of changes after one version comes to, number by number: the first change says
/// whether the device had the number, the last whether it has it now.
struct DirectoryChangeFold {
  enum Operation: String { case add, remove, relabel }

  private var had: [Int64: Bool] = [:]
  private var has: [Int64: Bool] = [:]
  /// Numbers the device had whose label may have changed since (relabelled, or removed and
  /// added again).
  private var replaced: Set<Int64> = []

  mutating func apply(_ operation: Operation, _ number: Int64) {
    if had[number] == nil { had[number] = operation != .add }
    has[number] = operation != .remove
    if operation != .remove, had[number] == true { replaced.insert(number) }
  }

  /// Numbers to add (or relabel, with `labels`) and numbers to remove, each ascending. A blocked
  /// number removed and added again in between is no change at all.
  func net(labels: Bool) -> (upserted: [Int64], removed: [Int64]) {
    var upserted: [Int64] = []
    var removed: [Int64] = []
    for (number, now) in has {
      let before = had[number] ?? false
      switch (before, now) {
      case (false, true): upserted.append(number)
      case (true, false): removed.append(number)
      case (true, true): if labels, replaced.contains(number) { upserted.append(number) }
      case (false, false): break
      }
    }
    return (upserted.sorted(), removed.sorted())
  }
}
