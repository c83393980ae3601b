import DialtonePostgres
import DialtoneProtocol

extension PostgresStore: DirectoryStore {
  private enum Kind: String { case identify, block }

  public func replaceDirectory(of userId: String, identify: [Int64: String], block: Set<Int64>) async throws
    -> DirectoryUploadResponse
  {
    try await pool.run { connection in
      try connection.transaction {
        // Two uploads for one user must not both move on from the same version.
        try PostgresSchema.lock(.directory, userId, on: connection)
        return try Self.replace(of: userId, identify: identify, block: block, on: connection)
      }
    }
  }

  private static func replace(
    of userId: String, identify: [Int64: String], block: Set<Int64>, on connection: PostgresConnection
  ) throws -> DirectoryUploadResponse {
    let user: PostgresValue = .text(userId)
    let state =
      try connection.query("SELECT version FROM directory_versions WHERE user_id = $1", [user]).first?.int64(0) ?? 0
    var current: [Kind: [Int64: String]] = [.identify: [:], .block: [:]]
    for row in try connection.query("SELECT kind, number, label FROM directory_entries WHERE user_id = $1", [user]) {
      guard let kind = try row.string(0).flatMap(Kind.init(rawValue:)), let number = try row.int64(1) else {
        continue
      }
      current[kind, default: [:]][number] = try row.string(2) ?? ""
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
          try connection.query(
            "DELETE FROM directory_entries WHERE user_id = $1 AND kind = $2 AND number = $3",
            [user, .text(kind.rawValue), .int64(number)])
        } else {
          try connection.query(
            """
            INSERT INTO directory_entries (user_id, kind, number, label) VALUES ($1, $2, $3, $4)
            ON CONFLICT (user_id, kind, number) DO UPDATE SET label = excluded.label
            """, [user, .text(kind.rawValue), .int64(number), .text(label)])
        }
        try connection.query(
          "INSERT INTO directory_changes (user_id, version, kind, number, op) VALUES ($1, $2, $3, $4, $5)",
          [user, .int64(version), .text(kind.rawValue), .int64(number), .text(operation.rawValue)])
      }
      // Changes are kept for the last versions only: a device further behind gets everything.
      let floor = max(0, version - DirectoryLimits.changeHistoryVersions)
      try connection.query(
        "DELETE FROM directory_changes WHERE user_id = $1 AND version <= $2", [user, .int64(floor)])
      try connection.query(
        """
        INSERT INTO directory_versions (user_id, version, floor) VALUES ($1, $2, $3)
        ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, floor = excluded.floor
        """, [user, .int64(version), .int64(floor)])
    }
    return DirectoryUploadResponse(version: version, identify: identify.count, block: block.count)
  }

  public func directory(of userId: String, since: Int64?) async throws -> DirectoryResponse {
    try await pool.run { connection in
      // One snapshot: an upload committing meanwhile is wholly in the answer or wholly out.
      try connection.transaction {
        try connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return try Self.directory(of: userId, since: since, on: connection)
      }
    }
  }

  private static func directory(of userId: String, since: Int64?, on connection: PostgresConnection) throws
    -> DirectoryResponse
  {
    let user: PostgresValue = .text(userId)
    let state = try connection.query("SELECT version, floor FROM directory_versions WHERE user_id = $1", [user]).first
    let version = try state?.int64(0) ?? 0
    let floor = try state?.int64(1) ?? 0
    var labels: [Int64: String] = [:]
    for row in try connection.query(
      "SELECT number, label FROM directory_entries WHERE user_id = $1 AND kind = 'identify'", [user])
    {
      guard let number = try row.int64(0), labels[number] == nil else { continue }
      labels[number] = try row.string(1) ?? ""
    }

    guard let since, since >= floor, since <= version else {
      let blocked = try connection.query(
        "SELECT number FROM directory_entries WHERE user_id = $1 AND kind = 'block' ORDER BY number", [user]
      ).compactMap { try $0.int64(0) }
      return DirectoryResponse(
        version: version, full: true,
        identify: labels.keys.sorted().map { DirectoryIdentification(number: $0, label: labels[$0] ?? "") },
        block: blocked)
    }
    var folds: [Kind: DirectoryChangeFold] = [.identify: DirectoryChangeFold(), .block: DirectoryChangeFold()]
    for row in try connection.query(
      "SELECT kind, number, op FROM directory_changes WHERE user_id = $1 AND version > $2 ORDER BY version, seq",
      [user, .int64(since)])
    {
      guard let kind = try row.string(0).flatMap(Kind.init(rawValue:)), let number = try row.int64(1),
        let operation = try row.string(2).flatMap(DirectoryChangeFold.Operation.init(rawValue:))
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
