import DialtoneProtocol
import DialtoneSQLite
import Foundation

/// The embedded default store: one SQLite file in WAL mode under the data directory, owned by
/// this actor (one connection, serialised access).
public actor SQLiteStore: CallStore, DeviceStore {
  private let db: SQLiteDatabase

  /// Versioned schema; each entry runs once, in order, inside a transaction.
  static let migrations: [String] = [
    """
    CREATE TABLE calls (
      call_id TEXT PRIMARY KEY,
      caller_id TEXT NOT NULL,
      callee_id TEXT NOT NULL,
      answered_by TEXT,
      video INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      answered_at INTEGER,
      ended_at INTEGER,
      end_reason TEXT,
      duration_ms INTEGER
    );
    CREATE INDEX calls_by_caller ON calls (caller_id, created_at DESC, call_id DESC);
    CREATE INDEX calls_by_callee ON calls (callee_id, created_at DESC, call_id DESC);
    """,
    """
    CREATE TABLE devices (
      user_id TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      device_id TEXT NOT NULL,
      platform TEXT NOT NULL,
      voip_token TEXT,
      alert_token TEXT,
      fcm_token TEXT,
      bundle_id TEXT,
      apns_environment TEXT,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (user_id, installation_id)
    );
    CREATE INDEX devices_by_voip_token ON devices (voip_token);
    CREATE INDEX devices_by_alert_token ON devices (alert_token);
    CREATE INDEX devices_by_fcm_token ON devices (fcm_token);
    """,
  ]

  public init(path: String) throws {
    db = try SQLiteDatabase(path: path)
    try Self.migrate(db)
  }

  public static func open(dataDirectory: String) throws -> SQLiteStore {
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    return try SQLiteStore(path: (dataDirectory as NSString).appendingPathComponent("dialtone.sqlite"))
  }

  private static func migrate(_ db: SQLiteDatabase) throws {
    try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
    let applied = try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").first?.first?.int ?? 0
    for (index, sql) in migrations.enumerated() where Int64(index + 1) > applied {
      try db.transaction {
        try db.execute(sql)
        try db.query("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                     [.integer(Int64(index + 1)), .integer(Int64(Date().timeIntervalSince1970))])
      }
    }
  }

  public func schemaVersion() throws -> Int64 {
    try db.query("SELECT MAX(version) FROM schema_migrations").first?.first?.int ?? 0
  }

  public func save(_ records: [CallRecord]) throws {
    // One transaction: a WAL commit costs several page writes, whatever it holds.
    try db.transaction {
      for record in records { try insert(record) }
    }
  }

  public func save(_ record: CallRecord) throws {
    try insert(record)
  }

  private func insert(_ record: CallRecord) throws {
    try db.query("""
      INSERT INTO calls (call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason, duration_ms)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (call_id) DO UPDATE SET answered_by = excluded.answered_by, answered_at = excluded.answered_at,
        ended_at = excluded.ended_at, end_reason = excluded.end_reason, duration_ms = excluded.duration_ms
      """, [
        .text(record.callId), .text(record.callerId), .text(record.calleeId), record.answeredBy.map(SQLiteValue.text) ?? .null,
        .integer(record.video ? 1 : 0), .integer(record.createdAt), record.answeredAt.map(SQLiteValue.integer) ?? .null,
        record.endedAt.map(SQLiteValue.integer) ?? .null, record.endReason.map { .text($0.rawValue) } ?? .null,
        record.durationMs.map(SQLiteValue.integer) ?? .null,
      ])
  }

  public func history(of userId: String, limit: Int, before cursor: HistoryCursor?) throws -> [CallRecord] {
    let columns = "call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason, duration_ms"
    let page = "(created_at < ? OR (created_at = ? AND call_id < ?))"
    let bound: [SQLiteValue] = cursor.map { [.integer($0.createdAt), .integer($0.createdAt), .text($0.callId)] }
      ?? [.integer(Int64.max), .integer(Int64.max), .text("")]
    // Two index range scans merged, rather than one OR over two columns.
    let rows = try db.query("""
      SELECT \(columns) FROM (
        SELECT * FROM (SELECT \(columns) FROM calls WHERE caller_id = ? AND \(page) ORDER BY created_at DESC, call_id DESC LIMIT ?)
        UNION
        SELECT * FROM (SELECT \(columns) FROM calls WHERE callee_id = ? AND \(page) ORDER BY created_at DESC, call_id DESC LIMIT ?)
      ) ORDER BY created_at DESC, call_id DESC LIMIT ?
      """, [.text(userId)] + bound + [.integer(Int64(limit)), .text(userId)] + bound + [.integer(Int64(limit)), .integer(Int64(limit))])
    return rows.compactMap(Self.record)
  }

  private static func record(_ row: SQLiteRow) -> CallRecord? {
    guard row.count == 10, let callId = row[0].string, let caller = row[1].string, let callee = row[2].string,
          let createdAt = row[5].int else { return nil }
    return CallRecord(callId: callId, callerId: caller, calleeId: callee, answeredBy: row[3].string,
                      video: row[4].int == 1, createdAt: createdAt, answeredAt: row[6].int, endedAt: row[7].int,
                      endReason: row[8].string.map { EndReason(lenient: $0) }, durationMs: row[9].int)
  }

  // MARK: - Devices

  private static let deviceColumns = "user_id, installation_id, device_id, platform, voip_token, alert_token, fcm_token, bundle_id, apns_environment, updated_at"

  public func upsert(_ registration: DeviceRegistration, userId: String, deviceId: String, now: Int64) throws -> StoredDevice {
    let owner: [SQLiteValue] = [.text(userId), .text(registration.installationId)]
    try db.transaction {
      // A token belongs to one installation: take it away from any other row first.
      for (column, token) in [("voip_token", registration.voipToken), ("alert_token", registration.alertToken),
                              ("fcm_token", registration.fcmToken)] {
        guard let token else { continue }
        try db.query("UPDATE devices SET \(column) = NULL WHERE \(column) = ? AND NOT (user_id = ? AND installation_id = ?)",
                     [.text(token)] + owner)
      }
      try db.query("DELETE FROM devices WHERE voip_token IS NULL AND alert_token IS NULL AND fcm_token IS NULL")
      try db.query("""
        INSERT INTO devices (\(Self.deviceColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (user_id, installation_id) DO UPDATE SET device_id = excluded.device_id, platform = excluded.platform,
          voip_token = excluded.voip_token, alert_token = excluded.alert_token, fcm_token = excluded.fcm_token,
          bundle_id = excluded.bundle_id, apns_environment = excluded.apns_environment, updated_at = excluded.updated_at
        """, owner + [
          .text(deviceId), .text(registration.platform.rawValue), Self.optional(registration.voipToken),
          Self.optional(registration.alertToken), Self.optional(registration.fcmToken), Self.optional(registration.bundleId),
          Self.optional(registration.apnsEnvironment?.rawValue), .integer(now),
        ])
    }
    return StoredDevice(userId: userId, deviceId: deviceId, registration: registration, updatedAt: now)
  }

  public func remove(installationId: String, userId: String) throws -> Bool {
    try db.query("DELETE FROM devices WHERE user_id = ? AND installation_id = ?", [.text(userId), .text(installationId)])
    return db.changes > 0
  }

  public func devices(of userId: String) throws -> [StoredDevice] {
    try db.query("SELECT \(Self.deviceColumns) FROM devices WHERE user_id = ? ORDER BY installation_id", [.text(userId)])
      .compactMap(Self.device)
  }

  public func removeToken(_ token: String, kind: PushTokenKind) throws {
    try db.transaction {
      try db.query("UPDATE devices SET \(kind.rawValue)_token = NULL WHERE \(kind.rawValue)_token = ?", [.text(token)])
      try db.query("DELETE FROM devices WHERE voip_token IS NULL AND alert_token IS NULL AND fcm_token IS NULL")
    }
  }

  private static func optional(_ text: String?) -> SQLiteValue { text.map(SQLiteValue.text) ?? .null }

  private static func device(_ row: SQLiteRow) -> StoredDevice? {
    guard row.count == 10, let user = row[0].string, let installation = row[1].string, let device = row[2].string,
          let platform = row[3].string.flatMap(PushPlatform.init(rawValue:)), let updatedAt = row[9].int else { return nil }
    let registration = DeviceRegistration(
      installationId: installation, platform: platform, voipToken: row[4].string, alertToken: row[5].string,
      fcmToken: row[6].string, bundleId: row[7].string, apnsEnvironment: row[8].string.flatMap(APNsEnvironment.init(rawValue:)))
    return StoredDevice(userId: user, deviceId: device, registration: registration, updatedAt: updatedAt)
  }
}
