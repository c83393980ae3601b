import DialtoneProtocol
import DialtoneSQLite

extension SQLiteStore: DirectoryStore {
  public func replaceDirectory(of userId: String, identify: [Int64: String], block: Set<Int64>) throws
    -> DirectoryUploadResponse
  {
    try db.transaction {
      let state =
        try db.query(
          "SELECT version FROM directory_versions WHERE user_id = ?", [.text(userId)]
        ).first?.first?.int ?? 0
      var current: [DirectoryKind: [Int64: String]] = [:]
      for row in try db.query(
        "SELECT kind, number, label FROM directory_entries WHERE user_id = ?", [.text(userId)])
      {
        guard row.count == 3, let kind = row[0].string.flatMap(DirectoryKind.init(rawValue:)), let number = row[1].int
        else { continue }
        current[kind, default: [:]][number] = row[2].string ?? ""
      }
      let changes = DirectoryPlan.changes(from: current, identify: identify, block: block)
      var version = state
      if !changes.isEmpty {
        version = state + 1
        for change in changes {
          let key: [SQLiteValue] = [.text(userId), .text(change.kind.rawValue), .integer(change.number)]
          if change.operation == .remove {
            try db.query("DELETE FROM directory_entries WHERE user_id = ? AND kind = ? AND number = ?", key)
          } else {
            try db.query(
              """
              INSERT INTO directory_entries (user_id, kind, number, label) VALUES (?, ?, ?, ?)
              ON CONFLICT (user_id, kind, number) DO UPDATE SET label = excluded.label
              """, key + [.text(change.label)])
          }
          try db.query(
            "INSERT INTO directory_changes (user_id, version, kind, number, op) VALUES (?, ?, ?, ?, ?)",
            [
              .text(userId), .integer(version), .text(change.kind.rawValue), .integer(change.number),
              .text(change.operation.rawValue),
            ])
        }
        let floor = DirectoryPlan.floor(of: version)
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

    guard let since, DirectoryPlan.answersWithChanges(since: since, floor: floor, version: version) else {
      let blocked = try db.query(
        "SELECT number FROM directory_entries WHERE user_id = ? AND kind = 'block' ORDER BY number", [.text(userId)]
      ).compactMap { $0.first?.int }
      return DirectoryPlan.full(version: version, labels: labels, blocked: blocked)
    }
    let log = try db.query(
      "SELECT kind, number, op FROM directory_changes WHERE user_id = ? AND version > ? ORDER BY version, rowid",
      [.text(userId), .integer(since)]
    ).compactMap { row -> (DirectoryKind, Int64, DirectoryChangeFold.Operation)? in
      guard row.count == 3, let kind = row[0].string.flatMap(DirectoryKind.init(rawValue:)), let number = row[1].int,
        let operation = row[2].string.flatMap(DirectoryChangeFold.Operation.init(rawValue:))
      else { return nil }
      return (kind, number, operation)
    }
    return DirectoryPlan.changes(version: version, labels: labels, log: log)
  }
}
