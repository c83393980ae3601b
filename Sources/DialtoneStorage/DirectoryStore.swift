import DialtoneProtocol

/// A user's phone-number directory (protocol.md §16.11): numbers to label and numbers to block,
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

/// The two lists of a directory, as the stores name them.
package enum DirectoryKind: String, CaseIterable {
  case identify, block
}

/// One number's change in an upload: what the stores write to their entries and change log.
package struct DirectoryEntryChange {
  package let kind: DirectoryKind
  package let number: Int64
  package let operation: DirectoryChangeFold.Operation
  /// The new label (identify adds and relabels; empty otherwise).
  package let label: String
}

/// The store-independent part of the directory: what an upload changes, which versions of
/// changes are kept, and the answer built from what a store read. The stores only run SQL.
package enum DirectoryPlan {
  /// The changes that turn `current` (the user's stored entries by kind) into the uploaded lists.
  package static func changes(
    from current: [DirectoryKind: [Int64: String]], identify: [Int64: String], block: Set<Int64>
  )
    -> [DirectoryEntryChange]
  {
    let wanted: [DirectoryKind: [Int64: String]] = [
      .identify: identify, .block: Dictionary(uniqueKeysWithValues: block.map { ($0, "") }),
    ]
    var changes: [DirectoryEntryChange] = []
    for kind in DirectoryKind.allCases {
      let before = current[kind] ?? [:]
      let after = wanted[kind] ?? [:]
      for (number, _) in before where after[number] == nil {
        changes.append(.init(kind: kind, number: number, operation: .remove, label: ""))
      }
      for (number, label) in after {
        if let old = before[number] {
          if old != label { changes.append(.init(kind: kind, number: number, operation: .relabel, label: label)) }
        } else {
          changes.append(.init(kind: kind, number: number, operation: .add, label: label))
        }
      }
    }
    return changes
  }

  /// Changes are kept for the last versions only: a device further behind gets everything.
  package static func floor(of version: Int64) -> Int64 { max(0, version - DirectoryLimits.changeHistoryVersions) }

  /// Whether a device at `since` gets the changes since then rather than the whole lists.
  package static func answersWithChanges(since: Int64, floor: Int64, version: Int64) -> Bool {
    since >= floor && since <= version
  }

  package static func full(version: Int64, labels: [Int64: String], blocked: [Int64]) -> DirectoryResponse {
    DirectoryResponse(
      version: version, full: true,
      identify: labels.keys.sorted().map { DirectoryIdentification(number: $0, label: labels[$0] ?? "") },
      block: blocked)
  }

  /// The net of the logged changes after the device's version, in log order.
  package static func changes(
    version: Int64, labels: [Int64: String], log: [(DirectoryKind, Int64, DirectoryChangeFold.Operation)]
  ) -> DirectoryResponse {
    var folds: [DirectoryKind: DirectoryChangeFold] = [.identify: DirectoryChangeFold(), .block: DirectoryChangeFold()]
    for (kind, number, operation) in log { folds[kind]?.apply(operation, number) }
    let identify = folds[.identify]?.net(labels: true) ?? (upserted: [], removed: [])
    let block = folds[.block]?.net(labels: false) ?? (upserted: [], removed: [])
    return DirectoryResponse(
      version: version, full: false,
      identify: identify.upserted.map { DirectoryIdentification(number: $0, label: labels[$0] ?? "") },
      block: block.upserted, removedIdentify: identify.removed, removedBlock: block.removed)
  }
}

/// What a run of changes after one version comes to, number by number: the first change says
/// whether the device had the number, the last whether it has it now.
package struct DirectoryChangeFold {
  package enum Operation: String { case add, remove, relabel }

  private var had: [Int64: Bool] = [:]
  private var has: [Int64: Bool] = [:]
  /// Numbers the device had whose label may have changed since (relabelled, or removed and
  /// added again).
  private var replaced: Set<Int64> = []

  package mutating func apply(_ operation: Operation, _ number: Int64) {
    if had[number] == nil { had[number] = operation != .add }
    has[number] = operation != .remove
    if operation != .remove, had[number] == true { replaced.insert(number) }
  }

  /// Numbers to add (or relabel, with `labels`) and numbers to remove, each ascending. A blocked
  /// number removed and added again in between is no change at all.
  package func net(labels: Bool) -> (upserted: [Int64], removed: [Int64]) {
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
