import DialtonePostgres
import DialtoneProtocol
import Foundation

extension PostgresStore: QualityStore {
  public func recordQuality(callId: CallID, _ stored: StoredQualityReport, maxDevicesPerCall: Int) async throws
    -> QualityRecordResult
  {
    try await pool.run { connection in
      try connection.transaction { () throws -> QualityRecordResult in
        // The devices bound counts the call's reports: one writer per call at a time.
        try PostgresSchema.lock(.quality, callId, on: connection)
        let key: [PostgresValue] = [.text(callId), .text(stored.userId), .text(stored.deviceId)]
        let existing = try connection.query(
          "SELECT final FROM call_quality WHERE call_id = $1 AND user_id = $2 AND device_id = $3", key)
        if let row = existing.first {
          if try row.bool(0) == true { return .finalAlreadyStored }
        } else {
          let others =
            try connection.query("SELECT COUNT(*) FROM call_quality WHERE call_id = $1", [.text(callId)]).first?
            .int64(0) ?? 0
          if others >= Int64(maxDevicesPerCall) { return .tooManyDevices }
        }
        try connection.query(
          """
          INSERT INTO call_quality (call_id, user_id, device_id, role, final, received_at, report)
          VALUES ($1, $2, $3, $4, $5, $6, $7)
          ON CONFLICT (call_id, user_id, device_id) DO UPDATE SET
            role = excluded.role, final = excluded.final, received_at = excluded.received_at, report = excluded.report
          """,
          key + [
            .text(stored.role), .bool(stored.report.final), .int64(stored.receivedAt),
            .text(String(decoding: MessageCodec.encode(stored.report), as: UTF8.self)),
          ])
        return .stored
      }
    }
  }

  public func qualityReports(of callId: CallID) async throws -> [StoredQualityReport] {
    try await pool.run { connection in try Self.qualityReports(of: callId, on: connection) }
  }

  public func call(_ callId: CallID, visibleTo userId: String, blocked: BlockedCallsInHistory = .hide) async throws
    -> CallRecord?
  {
    try await pool.run { connection in
      try connection.query(
        """
        SELECT \(Self.callColumns), callee_id = $1 AND blocked FROM calls
        WHERE call_id = $2 AND (caller_id = $1 OR (callee_id = $1 AND (NOT blocked OR $3)))
        """, [.text(userId), .text(callId), .bool(blocked == .show)]
      ).first.map(Self.record)
    }
  }

  public func recentCalls(limit: Int) async throws -> [(CallRecord, [StoredQualityReport])] {
    try await pool.run { connection in
      let calls = try connection.query(
        "SELECT \(Self.callColumns) FROM calls ORDER BY created_at DESC, call_id DESC LIMIT $1",
        [.int64(Int64(limit))]
      ).map(Self.record)
      return try calls.map { ($0, try Self.qualityReports(of: $0.callId, on: connection)) }
    }
  }

  private static func qualityReports(of callId: CallID, on connection: PostgresConnection) throws
    -> [StoredQualityReport]
  {
    try connection.query(
      """
      SELECT user_id, device_id, role, received_at, report FROM call_quality WHERE call_id = $1
      ORDER BY role, user_id, device_id
      """, [.text(callId)]
    ).compactMap(qualityReport)
  }

  /// A stored row; a report that no longer decodes (written by a later version) is skipped.
  private static func qualityReport(_ row: PostgresRow) throws -> StoredQualityReport? {
    guard let userId = try row.string(0), let deviceId = try row.string(1), let role = try row.string(2),
      let receivedAt = try row.int64(3), let text = try row.string(4),
      let report = try? MessageCodec.decode(QualityReport.self, from: Array(text.utf8), options: .lenient)
    else { return nil }
    return StoredQualityReport(userId: userId, deviceId: deviceId, role: role, receivedAt: receivedAt, report: report)
  }
}
