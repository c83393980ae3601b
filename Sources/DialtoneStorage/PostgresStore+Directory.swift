import DialtonePostgres
import DialtoneProtocol

extension PostgresStore: DirectoryStore {
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
    var current: [DirectoryKind: [Int64: String]] = [:]
    for row in try connection.query("SELECT kind, number, label FROM directory_entries WHERE user_id = $1", [user]) {
      guard let kind = try row.string(0).flatMap(DirectoryKind.init(rawValue:)), let number = try row.int64(1) else {
        continue
      }
      current[kind, default: [:]][number] = try row.string(2) ?? ""
    }
    let changes = DirectoryPlan.changes(from: current, identify: identify, block: block)
    var version = state
    if !changes.isEmpty {
      version = state + 1
      for change in changes {
        let key: [PostgresValue] = [user, .text(change.kind.rawValue), .int64(change.number)]
        if change.operation == .remove {
          try connection.query("DELETE FROM directory_entries WHERE user_id = $1 AND kind = $2 AND number = $3", key)
        } else {
          try connection.query(
            """
            INSERT INTO directory_entries (user_id, kind, number, label) VALUES ($1, $2, $3, $4)
            ON CONFLICT (user_id, kind, number) DO UPDATE SET label = excluded.label
            """, key + [.text(change.label)])
        }
        try connection.query(
          "INSERT INTO directory_changes (user_id, version, kind, number, op) VALUES ($1, $2, $3, $4, $5)",
          [user, .int64(version), .text(change.kind.rawValue), .int64(change.number), .text(change.operation.rawValue)])
      }
      let floor = DirectoryPlan.floor(of: version)
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

    guard let since, DirectoryPlan.answersWithChanges(since: since, floor: floor, version: version) else {
      let blocked = try connection.query(
        "SELECT number FROM directory_entries WHERE user_id = $1 AND kind = 'block' ORDER BY number", [user]
      ).compactMap { try $0.int64(0) }
      return DirectoryPlan.full(version: version, labels: labels, blocked: blocked)
    }
    var log: [(DirectoryKind, Int64, DirectoryChangeFold.Operation)] = []
    for row in try connection.query(
      "SELECT kind, number, op FROM directory_changes WHERE user_id = $1 AND version > $2 ORDER BY version, seq",
      [user, .int64(since)])
    {
      guard let kind = try row.string(0).flatMap(DirectoryKind.init(rawValue:)), let number = try row.int64(1),
        let operation = try row.string(2).flatMap(DirectoryChangeFold.Operation.init(rawValue:))
      else { continue }
      log.append((kind, number, operation))
    }
    return DirectoryPlan.changes(version: version, labels: labels, log: log)
  }
}
