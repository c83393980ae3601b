import DialtonePostgres
import DialtoneProtocol

extension PostgresStore: BlockStore {
  public func blocks(of userId: String) async throws -> [BlockedUser] {
    try await pool.run { connection in
      try connection.query(
        "SELECT blocked_id, created_at FROM blocks WHERE user_id = $1 ORDER BY created_at, blocked_id",
        [.text(userId)]
      ).map { row in
        BlockedUser(
          userId: try Self.required(row.string(0), "blocked_id"),
          createdAt: try Self.required(row.int64(1), "created_at"))
      }
    }
  }

  public func allBlocks() async throws -> [(userId: String, blockedId: String)] {
    try await pool.run { connection in
      try connection.query("SELECT user_id, blocked_id FROM blocks").map { row in
        (try Self.required(row.string(0), "user_id"), try Self.required(row.string(1), "blocked_id"))
      }
    }
  }

  public func block(_ blockedId: String, by userId: String, at milliseconds: Int64, limit: Int) async throws
    -> BlockResult
  {
    try await pool.run { connection in
      try connection.transaction { () throws -> BlockResult in
        // The count and the insert are one step for this user, as on SQLite's one connection.
        try PostgresSchema.lock(.blocks, userId, on: connection)
        let owner: [PostgresValue] = [.text(userId)]
        let exists = try connection.query(
          "SELECT 1 FROM blocks WHERE user_id = $1 AND blocked_id = $2", owner + [.text(blockedId)])
        guard exists.isEmpty else { return .alreadyBlocked }
        let count = try connection.query("SELECT COUNT(*) FROM blocks WHERE user_id = $1", owner).first?.int64(0) ?? 0
        guard count < Int64(limit) else { return .limitReached }
        let inserted = try connection.query(
          "INSERT INTO blocks (user_id, blocked_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1",
          owner + [.text(blockedId), .int64(milliseconds)])
        return inserted.isEmpty ? .alreadyBlocked : .added
      }
    }
  }

  public func unblock(_ blockedId: String, by userId: String) async throws -> Bool {
    try await pool.run { connection in
      try !connection.query(
        "DELETE FROM blocks WHERE user_id = $1 AND blocked_id = $2 RETURNING 1", [.text(userId), .text(blockedId)]
      ).isEmpty
    }
  }
}
