import DialtoneProtocol
import DialtonePush
import DialtoneSQLite
import Foundation

/// The embedded default store: one SQLite file in WAL mode under the data directory, owned by
/// this actor (one connection, serialised access).
public actor SQLiteStore: CallStore, DeviceStore, GroupCallStore {
  package let db: SQLiteDatabase

  /// Versioned schema; each entry runs once, in order, inside a transaction.
  package static let migrations: [String] = [
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
    // Push tokens as rows (kind, token, topic, environment) instead of a column per kind, so a
    // new push provider needs no schema change.
    """
    CREATE TABLE push_tokens (
      user_id TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      token TEXT NOT NULL,
      topic TEXT,
      environment TEXT,
      PRIMARY KEY (user_id, installation_id, kind),
      UNIQUE (kind, token)
    );
    INSERT OR IGNORE INTO push_tokens SELECT user_id, installation_id, 'voip', voip_token, bundle_id, apns_environment
      FROM devices WHERE voip_token IS NOT NULL;
    INSERT OR IGNORE INTO push_tokens SELECT user_id, installation_id, 'alert', alert_token, bundle_id, apns_environment
      FROM devices WHERE alert_token IS NOT NULL;
    INSERT OR IGNORE INTO push_tokens SELECT user_id, installation_id, 'fcm', fcm_token, NULL, NULL
      FROM devices WHERE fcm_token IS NOT NULL;
    CREATE TABLE installations (
      user_id TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      device_id TEXT NOT NULL,
      platform TEXT NOT NULL,
      updated_at INTEGER NOT NULL,
      PRIMARY KEY (user_id, installation_id)
    );
    INSERT INTO installations SELECT user_id, installation_id, device_id, platform, updated_at FROM devices;
    DROP TABLE devices;
    ALTER TABLE installations RENAME TO devices;
    """,
    """
    CREATE TABLE group_calls (
      call_id TEXT PRIMARY KEY,
      creator_id TEXT NOT NULL,
      title TEXT,
      room TEXT,
      video INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      ended_at INTEGER NOT NULL,
      end_reason TEXT NOT NULL
    );
    CREATE TABLE group_call_members (
      call_id TEXT NOT NULL REFERENCES group_calls (call_id),
      position INTEGER NOT NULL,
      user_id TEXT NOT NULL,
      outcome TEXT NOT NULL,
      device_id TEXT,
      joined_at INTEGER,
      duration_ms INTEGER,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (call_id, user_id)
    );
    CREATE INDEX group_call_members_by_user ON group_call_members (user_id, created_at DESC, call_id DESC);
    """,
    // Calls in progress, so that a restart ends none of them (`SQLiteLiveCallStore`). A rowid
    // table: a row holds the invite and accept with their SDP (a few KB), which a WITHOUT ROWID
    // table would spill into overflow pages on every update.
    """
    CREATE TABLE live_calls (
      call_id TEXT PRIMARY KEY,
      caller_id TEXT NOT NULL,
      caller_device TEXT NOT NULL,
      caller_name TEXT,
      callee_id TEXT NOT NULL,
      video INTEGER NOT NULL,
      created_at INTEGER NOT NULL,
      phase TEXT NOT NULL,
      answered_by TEXT,
      answered_at INTEGER,
      ring_deadline INTEGER NOT NULL,
      caller_grace_deadline INTEGER,
      answerer_grace_deadline INTEGER,
      invite TEXT NOT NULL,
      accept TEXT
    );
    CREATE TABLE live_call_signals (
      call_id TEXT NOT NULL,
      message TEXT NOT NULL
    );
    CREATE INDEX live_call_signals_by_call ON live_call_signals (call_id);
    CREATE TABLE live_group_calls (
      call_id TEXT PRIMARY KEY,
      record TEXT NOT NULL
    );
    """,
    // The caller's device: a restarted server reloads the calls that ended within
    // `endedRetention`, so `get-call` still answers for them. No index by end: records are added
    // as calls end, so the newest rowids are the latest ends.
    "ALTER TABLE calls ADD COLUMN caller_device TEXT;",
    // Call-quality reports, one per (call, device): a later report replaces an earlier one
    // until the device's final one. The report is kept as its wire JSON.
    """
    CREATE TABLE call_quality (
      call_id TEXT NOT NULL,
      user_id TEXT NOT NULL,
      device_id TEXT NOT NULL,
      role TEXT NOT NULL,
      final INTEGER NOT NULL,
      received_at INTEGER NOT NULL,
      report TEXT NOT NULL,
      PRIMARY KEY (call_id, user_id, device_id)
    );
    CREATE INDEX calls_by_creation ON calls (created_at DESC, call_id DESC);
    """,
    // Who blocks whom (`/v1/blocks`); calls a block silenced are kept from the blocker's history.
    """
    CREATE TABLE blocks (
      user_id TEXT NOT NULL,
      blocked_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (user_id, blocked_id)
    ) WITHOUT ROWID;
    ALTER TABLE live_calls ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE calls ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
    """,
    // Phone-number directories (`/v1/directory`): the current lists, and each version's changes
    // for the last `DirectoryLimits.changeHistoryVersions` versions (a rowid table: changes are
    // read back in the order they were made).
    """
    CREATE TABLE directory_versions (
      user_id TEXT PRIMARY KEY,
      version INTEGER NOT NULL,
      floor INTEGER NOT NULL
    );
    CREATE TABLE directory_entries (
      user_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      number INTEGER NOT NULL,
      label TEXT NOT NULL,
      PRIMARY KEY (user_id, kind, number)
    ) WITHOUT ROWID;
    CREATE TABLE directory_changes (
      user_id TEXT NOT NULL,
      version INTEGER NOT NULL,
      kind TEXT NOT NULL,
      number INTEGER NOT NULL,
      op TEXT NOT NULL
    );
    CREATE INDEX directory_changes_by_user ON directory_changes (user_id, version);
    """,
    // Group calls a block silenced for a member (they block the creator): kept from that member's
    // history, like a blocked 1:1 call from the callee's.
    """
    ALTER TABLE group_call_members ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE live_group_calls ADD COLUMN silenced TEXT NOT NULL DEFAULT '';
    """,
    // A live call's offer and answer SDP as they are, outside the invite's and the accept's JSON
    // (`StoredSessionDescription`): NULL in the rows written before, whose JSON holds them.
    """
    ALTER TABLE live_calls ADD COLUMN offer_sdp TEXT;
    ALTER TABLE live_calls ADD COLUMN answer_sdp TEXT;
    """,
    // What a live call's invite and accept hold beyond the row's other columns, for the messages
    // made again from the row (`StoredCallMessages`): NULL where the message is stored as JSON.
    """
    ALTER TABLE live_calls ADD COLUMN invite_preconnect INTEGER;
    ALTER TABLE live_calls ADD COLUMN answerer_name TEXT;
    ALTER TABLE live_calls ADD COLUMN accept_preconnected INTEGER;
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

  package static func migrate(_ db: SQLiteDatabase) throws {
    try db.execute(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
    let applied = try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").first?.first?.int ?? 0
    for (index, sql) in migrations.enumerated() where Int64(index + 1) > applied {
      try db.transaction {
        try db.execute(sql)
        try db.query(
          "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
          [.integer(Int64(index + 1)), .integer(Int64(Date().timeIntervalSince1970))])
      }
    }
  }

  public func schemaVersion() throws -> Int64 {
    try db.query("SELECT MAX(version) FROM schema_migrations").first?.first?.int ?? 0
  }

  /// History is append-only: a record already under the id is never replaced.
  package static func insert(
    _ record: CallRecord, into db: SQLiteDatabase, callerDevice: String? = nil, blocked: Bool = false
  )
    throws
  {
    try db.query(
      constant: """
        INSERT INTO calls (call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason,
          duration_ms, caller_device, blocked)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (call_id) DO NOTHING
        """,
      [
        .text(record.callId), .text(record.callerId), .text(record.calleeId),
        SQLiteValue(record.answeredBy),
        .integer(record.video ? 1 : 0), .integer(record.createdAt), SQLiteValue(record.answeredAt),
        SQLiteValue(record.endedAt), SQLiteValue(record.endReason?.rawValue),
        SQLiteValue(record.durationMs), SQLiteValue(callerDevice), .integer(blocked ? 1 : 0),
      ])
  }

  package static let callColumns =
    "call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason, duration_ms"

  public func history(
    of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory
  ) throws -> [CallRecord] {
    let columns = Self.callColumns
    let page = "(created_at < ? OR (created_at = ? AND call_id < ?))"
    let bound: [SQLiteValue] =
      cursor.map { [.integer($0.createdAt), .integer($0.createdAt), .text($0.callId)] }
      ?? [.integer(Int64.max), .integer(Int64.max), .text("")]
    // Two index range scans merged, rather than one OR over two columns.
    let rows = try db.query(
      """
      SELECT \(columns), silenced FROM (
        SELECT * FROM (SELECT \(columns), 0 AS silenced FROM calls WHERE caller_id = ? AND \(page) ORDER BY created_at DESC, call_id DESC LIMIT ?)
        UNION
        SELECT * FROM (SELECT \(columns), blocked AS silenced FROM calls WHERE callee_id = ? AND (blocked = 0 OR ?) AND \(page) ORDER BY created_at DESC, call_id DESC LIMIT ?)
      ) ORDER BY created_at DESC, call_id DESC LIMIT ?
      """,
      [.text(userId)] + bound + [.integer(Int64(limit)), .text(userId), .integer(blocked == .show ? 1 : 0)]
        + bound + [.integer(Int64(limit)), .integer(Int64(limit))])
    return rows.compactMap(Self.record)
  }

  /// A row of `callColumns`, optionally followed by whether the viewer's block silenced the call.
  package static func record(_ row: SQLiteRow) -> CallRecord? {
    guard row.count == 10 || row.count == 11, let callId = row[0].string, let caller = row[1].string,
      let callee = row[2].string,
      let createdAt = row[5].int
    else { return nil }
    return CallRecord(
      callId: callId, callerId: caller, calleeId: callee, answeredBy: row[3].string,
      video: row[4].int == 1, createdAt: createdAt, answeredAt: row[6].int, endedAt: row[7].int,
      endReason: row[8].string.map { EndReason(lenient: $0) }, durationMs: row[9].int,
      blocked: row.count == 11 && row[10].int == 1 ? true : nil)
  }

  // MARK: - Group calls

  /// Append-only, like the 1:1 history: a record already under the id is kept.
  package static func insertGroupCall(_ record: GroupCallRecord, silenced: Set<String> = [], into db: SQLiteDatabase)
    throws
  {
    try db.query(
      """
      INSERT INTO group_calls (call_id, creator_id, title, room, video, created_at, ended_at, end_reason)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (call_id) DO NOTHING
      """,
      [
        .text(record.callId), .text(record.creatorId), SQLiteValue(record.title), SQLiteValue(record.room),
        .integer(record.video ? 1 : 0), .integer(record.createdAt), .integer(record.endedAt),
        .text(record.endReason.rawValue),
      ])
    guard db.changes > 0 else { return }
    for (position, member) in record.participants.enumerated() {
      try db.query(
        """
        INSERT INTO group_call_members
          (call_id, position, user_id, outcome, device_id, joined_at, duration_ms, created_at, blocked)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [
          .text(record.callId), .integer(Int64(position)), .text(member.userId), .text(member.outcome.rawValue),
          SQLiteValue(member.deviceId), SQLiteValue(member.joinedAt),
          SQLiteValue(member.durationMs), .integer(record.createdAt),
          .integer(silenced.contains(member.userId) ? 1 : 0),
        ])
    }
  }

  public func groupHistory(
    of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory
  ) throws -> [GroupCallRecord] {
    let bound: [SQLiteValue] =
      cursor.map { [.integer($0.createdAt), .integer($0.createdAt), .text($0.callId)] }
      ?? [.integer(Int64.max), .integer(Int64.max), .text("")]
    let calls = try db.query(
      """
      SELECT g.call_id, g.creator_id, g.title, g.room, g.video, g.created_at, g.ended_at, g.end_reason, m.blocked
      FROM group_call_members m JOIN group_calls g ON g.call_id = m.call_id
      WHERE m.user_id = ? AND (m.blocked = 0 OR ?) AND (m.created_at < ? OR (m.created_at = ? AND m.call_id < ?))
      ORDER BY m.created_at DESC, m.call_id DESC LIMIT ?
      """, [.text(userId), .integer(blocked == .show ? 1 : 0)] + bound + [.integer(Int64(limit))])
    return try calls.compactMap { row -> GroupCallRecord? in
      guard row.count == 9, let callId = row[0].string, let creator = row[1].string, let createdAt = row[5].int,
        let endedAt = row[6].int, let reason = row[7].string
      else { return nil }
      let members = try db.query(
        """
        SELECT user_id, outcome, device_id, joined_at, duration_ms FROM group_call_members
        WHERE call_id = ? ORDER BY position
        """, [.text(callId)])
      return GroupCallRecord(
        callId: callId, creatorId: creator, title: row[2].string, room: row[3].string, video: row[4].int == 1,
        createdAt: createdAt, endedAt: endedAt, endReason: GroupEndReason(rawValue: reason) ?? .ended,
        participants: members.compactMap { m in
          guard m.count == 5, let user = m[0].string, let outcome = m[1].string.flatMap(GroupMemberState.init)
          else { return nil }
          return GroupParticipantRecord(
            userId: user, outcome: outcome, deviceId: m[2].string, joinedAt: m[3].int, durationMs: m[4].int)
        },
        blocked: row[8].int == 1 ? true : nil)
    }
  }

  // MARK: - Devices

  public func upsert(
    installationId: String, platform: PushPlatform, tokens: [PushToken], userId: String,
    deviceId: String, now: Int64
  ) throws -> StoredDevice {
    let owner: [SQLiteValue] = [.text(userId), .text(installationId)]
    try db.transaction {
      // A token belongs to one installation: take it away from any other first.
      for token in tokens { try release(token.token, kind: token.kind, except: (userId, installationId)) }
      try db.query(
        """
        INSERT INTO devices (user_id, installation_id, device_id, platform, updated_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (user_id, installation_id) DO UPDATE SET device_id = excluded.device_id,
          platform = excluded.platform, updated_at = excluded.updated_at
        """, owner + [.text(deviceId), .text(platform.rawValue), .integer(now)])
      // A registration replaces the installation's tokens as a whole.
      try db.query("DELETE FROM push_tokens WHERE user_id = ? AND installation_id = ?", owner)
      for token in tokens {
        try db.query(
          "INSERT INTO push_tokens (user_id, installation_id, kind, token, topic, environment) VALUES (?, ?, ?, ?, ?, ?)",
          owner + [
            .text(token.kind.rawValue), .text(token.token), SQLiteValue(token.topic),
            SQLiteValue(token.environment),
          ])
      }
    }
    return StoredDevice(
      userId: userId, installationId: installationId, deviceId: deviceId, platform: platform,
      tokens: tokens, updatedAt: now)
  }

  public func remove(installationId: String, userId: String) throws -> Bool {
    let owner: [SQLiteValue] = [.text(userId), .text(installationId)]
    var removed = false
    try db.transaction {
      try db.query("DELETE FROM push_tokens WHERE user_id = ? AND installation_id = ?", owner)
      try db.query("DELETE FROM devices WHERE user_id = ? AND installation_id = ?", owner)
      removed = db.changes > 0
    }
    return removed
  }

  public func devices(of userId: String) throws -> [StoredDevice] {
    var tokens: [String: [PushToken]] = [:]
    for row in try db.query(
      "SELECT installation_id, kind, token, topic, environment FROM push_tokens WHERE user_id = ? ORDER BY installation_id, kind",
      [.text(userId)])
    {
      guard row.count == 5, let installation = row[0].string, let kind = row[1].string, let token = row[2].string else {
        continue
      }
      tokens[installation, default: []].append(
        PushToken(kind: PushTokenKind(rawValue: kind), token: token, topic: row[3].string, environment: row[4].string))
    }
    return try db.query(
      "SELECT installation_id, device_id, platform, updated_at FROM devices WHERE user_id = ? ORDER BY installation_id",
      [.text(userId)]
    ).compactMap { row in
      guard row.count == 4, let installation = row[0].string, let device = row[1].string,
        let platform = row[2].string.flatMap(PushPlatform.init(rawValue:)), let updatedAt = row[3].int
      else { return nil }
      return StoredDevice(
        userId: userId, installationId: installation, deviceId: device, platform: platform,
        tokens: tokens[installation] ?? [], updatedAt: updatedAt)
    }
  }

  public func removeToken(_ token: String, kind: PushTokenKind) throws {
    try db.transaction { try release(token, kind: kind, except: nil) }
  }

  /// Deletes a token from whichever installation holds it (but `except`), and forgets that
  /// installation when it has no token left: it cannot be reached any more.
  private func release(_ token: String, kind: PushTokenKind, except owner: (String, String)?) throws {
    let key: [SQLiteValue] = [.text(kind.rawValue), .text(token)]
    guard
      let row = try db.query("SELECT user_id, installation_id FROM push_tokens WHERE kind = ? AND token = ?", key)
        .first,
      let user = row[0].string, let installation = row[1].string
    else { return }
    if let owner, owner == (user, installation) { return }
    try db.query("DELETE FROM push_tokens WHERE kind = ? AND token = ?", key)
    try db.query(
      """
      DELETE FROM devices WHERE user_id = ? AND installation_id = ? AND NOT EXISTS (
        SELECT 1 FROM push_tokens WHERE user_id = ? AND installation_id = ?)
      """, [.text(user), .text(installation), .text(user), .text(installation)])
  }

}
