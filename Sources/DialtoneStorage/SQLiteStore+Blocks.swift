import DialtoneProtocol
import DialtoneSQLite

extension SQLiteStore: BlockStore {
  public func blocks(of userId: String) throws -> [BlockedUser] {
    try db.query(
      "SELECT blocked_id, created_at FROM blocks WHERE user_id = ? ORDER BY created_at, blocked_id", [.text(userId)]
    ).compactMap { row in
      guard row.count == 2, let blocked = row[0].string, let createdAt = row[1].int else { return nil }
      return BlockedUser(userId: blocked, createdAt: createdAt)
    }
  }

  public func allBlocks() throws -> [(userId: String, blockedId: String)] {
    try db.query("SELECT user_id, blocked_id FROM blocks").compactMap { row in
      guard row.count == 2, let user = row[0].string, let blocked = row[1].string else { return nil }
      return (user, blocked)
    }
  }

  public func block(_ blockedId: String, by userId: String, at milliseconds: Int64, limit: Int) throws -> BlockResult {
    let owner: [SQLiteValue] = [.text(userId)]
    let exists = try db.query(
      "SELECT 1 FROM blocks WHERE user_id = ? AND blocked_id = ?", owner + [.text(blockedId)])
    guard exists.isEmpty else { return .alreadyBlocked }
    // The primary key (user_id, blocked_id) makes this a range count over the user's rows.
    let count = try db.query("SELECT COUNT(*) FROM blocks WHERE user_id = ?", owner).first?.first?.int ?? 0
    guard count < Int64(limit) else { return .limitReached }
    try db.query(
      "INSERT INTO blocks (user_id, blocked_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
      owner + [.text(blockedId), .integer(milliseconds)])
    return db.changes > 0 ? .added : .alreadyBlocked
  }

  public func unblock(_ blockedId: String, by userId: String) throws -> Bool {
    try db.query("DELETE FROM blocks WHERE user_id = ? AND blocked_id = ?", [.text(userId), .text(blockedId)])
    return db.changes > 0
  }
}
