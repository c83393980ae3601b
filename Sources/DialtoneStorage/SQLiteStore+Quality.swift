import DialtoneProtocol
import DialtoneSQLite
import Foundation

extension SQLiteStore: QualityStore {
  public func recordQuality(callId: CallID, _ stored: StoredQualityReport, maxDevicesPerCall: Int) throws
    -> QualityRecordResult
  {
    try db.transaction { () throws -> QualityRecordResult in
      let key: [SQLiteValue] = [.text(callId), .text(stored.userId), .text(stored.deviceId)]
      let existing = try db.query(
        "SELECT final FROM call_quality WHERE call_id = ? AND user_id = ? AND device_id = ?", key)
      if let final = existing.first?.first?.int {
        if final == 1 { return .finalAlreadyStored }
      } else {
        let others =
          try db.query("SELECT COUNT(*) FROM call_quality WHERE call_id = ?", [.text(callId)]).first?.first?.int ?? 0
        if others >= Int64(maxDevicesPerCall) { return .tooManyDevices }
      }
      try db.query(
        """
        INSERT INTO call_quality (call_id, user_id, device_id, role, final, received_at, report)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (call_id, user_id, device_id) DO UPDATE SET
          role = excluded.role, final = excluded.final, received_at = excluded.received_at, report = excluded.report
        """,
        key + [
          .text(stored.role), .integer(stored.report.final ? 1 : 0), .integer(stored.receivedAt),
          .text(String(decoding: MessageCodec.encode(stored.report), as: UTF8.self)),
        ])
      return .stored
    }
  }

  public func qualityReports(of callId: CallID) throws -> [StoredQualityReport] {
    let rows = try db.query(
      """
      SELECT user_id, device_id, role, received_at, report FROM call_quality WHERE call_id = ?
      ORDER BY role, user_id, device_id
      """, [.text(callId)])
    return rows.compactMap(Self.qualityReport)
  }

  public func call(_ callId: CallID, visibleTo userId: String, blocked: BlockedCallsInHistory = .hide) throws
    -> CallRecord?
  {
    try db.query(
      """
      SELECT \(Self.callColumns), callee_id = ? AND blocked = 1 FROM calls
      WHERE call_id = ? AND (caller_id = ? OR (callee_id = ? AND (blocked = 0 OR ?)))
      """,
      [.text(userId), .text(callId), .text(userId), .text(userId), .integer(blocked == .show ? 1 : 0)]
    ).first.flatMap(Self.record)
  }

  public func recentCalls(limit: Int) throws -> [(CallRecord, [StoredQualityReport])] {
    let calls = try db.query(
      "SELECT \(Self.callColumns) FROM calls ORDER BY created_at DESC, call_id DESC LIMIT ?",
      [.integer(Int64(limit))]
    ).compactMap(Self.record)
    return try calls.map { ($0, try qualityReports(of: $0.callId)) }
  }

  /// A stored row; a report that no longer decodes (written by a later version) is skipped.
  private static func qualityReport(_ row: SQLiteRow) -> StoredQualityReport? {
    guard row.count == 5, let userId = row[0].string, let deviceId = row[1].string, let role = row[2].string,
      let receivedAt = row[3].int, let text = row[4].string,
      let report = try? MessageCodec.decode(QualityReport.self, from: Array(text.utf8), options: .lenient)
    else { return nil }
    return StoredQualityReport(userId: userId, deviceId: deviceId, role: role, receivedAt: receivedAt, report: report)
  }
}
