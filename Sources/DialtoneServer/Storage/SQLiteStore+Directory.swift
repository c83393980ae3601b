import DialtoneProtocol
import DialtoneSQLite

extension SQLiteStore: DirectoryStore {
  private enum Kind: String { case identify, block }

  public func replaceDirectory(of userId: String, identify: [Int64: String], block: Set<Int64>) throws
    -> DirectoryUploadResponse
  {
    try db.transaction {
      let state =
        try db.query(
          "SELECT version FROM directory_versions WHERE user_id = ?", [.text(userId)]
        ).first?.first?.int ?? 0
      var current: [Kind: [Int64: String]] = [.identify: [:], .block: [:]]
      for row in try db.query(
        "SELECT kind, number, label FROM directory_entries WHERE user_id = ?", [.text(userId)])
      {
        guard row.count == 3, let kind = row[0].string.flatMap(Kind.init(rawValue:)), let number = row[1].int else {
          continue
        }
        current[kind, default: [:]][number] = row[2].string ?? ""
      }
      let wanted: [Kind: [Int64: String]] = [
        .identify: identify, .block: Dictionary(uniqueKeysWithValues: block.map { ($0, "") }),
      ]
      var changes: [(Kind, Int64, DirectoryChangeFold.Operation, String)] = []
      for kind in [Kind.identify, .block] {
        let before = current[kind] ?? [:]
        let after = wanted[kind] ?? [:]
        for (number, _) in before where after[number] == nil { changes.append((kind, number, .remove, "")) }
        for (number, label) in after {
          if let old = before[number] {
            if old != label { changes.append((kind, number, .relabel, label)) }
          } else {
            changes.append((kind, number, .add, label))
          }
        }
      }
      var version = state
      if !changes.isEmpty {
        version = state + 1
        for (kind, number, operation, label) in changes {
          if operation == .remove {
            try db.query(
              "DELETE FROM directory_entries WHERE user_id = ? AND kind = ? AND number = ?",
              [.text(userId), .text(kind.rawValue), .integer(number)])
          } else {
            try db.query(
              """
              INSERT INTO directory_entries (user_id, kind, number, label) VALUES (?, ?, ?, ?)
              ON CONFLICT (user_id, kind, number) DO UPDATE SET label = excluded.label
              """, [.text(userId), .text(kind.rawValue), .integer(number), .text(label)])
          }
          try db.query(
            "INSERT INTO directory_changes (user_id, version, kind, number, op) VALUES (?, ?, ?, ?, ?)",
            [.text(userId), .integer(version), .text(kind.rawValue), .integer(number), .text(operation.rawValue)])
        }
        // Changes are kept for the last versions only: a device further behind gets everything.
        let floor = max(0, version - DirectoryLimits.changeHistoryVersions)
        try db.query(
          "DELETE FROM directory_changes WHERE user_id = ? AND version <= ?", [.text(userId), .integer(floor)])
        try db.query(
          """
          INSERT INTO directory_versions (user_id, version, floor) VALUES (?, ?, ?)
          ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, floor = excluded.floor
          """, [.text(userId), .integer(version), .integer(floor)])
      }
      return DirectoryUploadResponse(version: version, identify: identify.count, block: block.count)
    }
  }

  public func directory(of userId: String, since: Int64?) throws -> DirectoryResponse {
    let state = try db.query("SELECT version, floor FROM directory_versions WHERE user_id = ?", [.text(userId)]).first
    let version = state?[0].int ?? 0
    let floor = state?[1].int ?? 0
    let labels = Dictionary(
      try db.query(
        "SELECT number, label FROM directory_entries WHERE user_id = ? AND kind = 'identify'", [.text(userId)]
      ).compactMap { row -> (Int64, String)? in
        guard row.count == 2, let number = row[0].int else { return nil }
        return (number, row[1].string ?? "")
      }, uniquingKeysWith: { first, _ in first })

    guard let since, since >= floor, since <= version else {
      let blocked = try db.query(
        "SELECT number FROM directory_entries WHERE user_id = ? AND kind = 'block' ORDER BY number", [.text(userId)]
      ).compactMap { $0.first?.int }
      return DirectoryResponse(
        version: version, full: true,
        identify: labels.keys.sorted().map { DirectoryIdentification(number: $0, label: labels[$0] ?? "") },
        block: blocked)
    }
    var folds: [Kind: DirectoryChangeFold] = [.identify: DirectoryChangeFold(), .block: DirectoryChangeFold()]
    for row in try db.query(
      "SELECT kind, number, op FROM directory_changes WHERE user_id = ? AND version > ? ORDER BY version, rowid",
      [.text(userId), .integer(since)])
    {
      guard row.count == 3, let kind = row[0].string.flatMap(Kind.init(rawValue:)), let number = row[1].int,
        let operation = row[2].string.flatMap(DirectoryChangeFold.Operation.init(rawValue:))
      else { continue }
      folds[kind]?.apply(operation, number)
    }
    let identify = folds[.identify]?.net(labels: true) ?? (upserted: [], removed: [])
    let block = folds[.block]?.net(labels: false) ?? (upserted: [], removed: [])
    return DirectoryResponse(
      version: version, full: false,
      identify: identify.upserted.map { DirectoryIdentification(number: $0, label: labels[$0] ?? "") },
      block: block.upserted, removedIdentify: identify.removed, removedBlock: block.removed)
  }
}
