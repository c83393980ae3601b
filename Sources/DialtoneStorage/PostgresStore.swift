import DialtonePostgres
import DialtoneProtocol
import DialtonePush
import Foundation

/// The store for servers sharing one database (`--database-url`): SQLiteStore's semantics on
/// PostgreSQL. libpq blocks its thread, so every query runs on the pool's own threads.
public final class PostgresStore: CallStore, DeviceStore, GroupCallStore {
  package let pool: PostgresThreadPool

  private init(pool: PostgresThreadPool) { self.pool = pool }

  /// Connects and migrates; a database that cannot be reached is an error naming it.
  public static func open(url: String, threads: Int = 4, preparedStatements: Int = 256) async throws -> PostgresStore {
    let pool = PostgresThreadPool(
      PostgresConfiguration(url: url, preparedStatements: preparedStatements), threads: threads, name: "postgres-store")
    do {
      _ = try await pool.run { connection in try PostgresSchema.migrations.apply(on: connection) }
    } catch {
      pool.close()
      throw PostgresStoreError(url: url, underlying: error)
    }
    return PostgresStore(pool: pool)
  }

  /// Both stores on one database (`--database-url`).
  package static func openBoth(url: String, preparedStatements: Int = 256) async throws -> (
    store: PostgresStore, liveCalls: PostgresLiveCallStore
  ) {
    let store = try await open(url: url, preparedStatements: preparedStatements)
    let liveCalls = try await PostgresLiveCallStore.open(url: url, preparedStatements: preparedStatements)
    return (store, liveCalls)
  }

  /// Stops the pool's threads and closes their connections once the queued queries ran.
  public func close() { pool.close() }

  public func schemaVersion() async throws -> Int64 {
    try await pool.run { connection in try PostgresSchema.migrations.version(on: connection) }
  }

  // MARK: - Shared with the live-call store

  /// History is append-only: a record already under the id is never replaced.
  package static func insert(
    _ record: CallRecord, on connection: PostgresConnection, callerDevice: String? = nil, blocked: Bool = false
  ) throws {
    let statement = insertStatement(record, callerDevice: callerDevice, blocked: blocked)
    try connection.query(statement.sql, statement.parameters)
  }

  /// `insert`'s statement, for a pipelined transaction.
  package static func insertStatement(_ record: CallRecord, callerDevice: String?, blocked: Bool) -> PostgresStatement {
    PostgresStatement(
      """
      INSERT INTO calls (call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason,
        duration_ms, caller_device, blocked)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
      ON CONFLICT (call_id) DO NOTHING
      """,
      [
        .text(record.callId), .text(record.callerId), .text(record.calleeId), PostgresValue(record.answeredBy),
        .bool(record.video), .int64(record.createdAt), PostgresValue(record.answeredAt),
        PostgresValue(record.endedAt), PostgresValue(record.endReason?.rawValue), PostgresValue(record.durationMs),
        PostgresValue(callerDevice), .bool(blocked),
      ])
  }

  package static let callColumns =
    "call_id, caller_id, callee_id, answered_by, video, created_at, answered_at, ended_at, end_reason, duration_ms"

  /// A row of `callColumns`, optionally followed by whether the viewer's block silenced the call.
  package static func record(_ row: PostgresRow) throws -> CallRecord {
    guard row.values.count == 10 || row.values.count == 11 else {
      throw PostgresError.decoding(column: "calls", message: "\(row.values.count) columns")
    }
    return CallRecord(
      callId: try required(row.string(0), "call_id"), callerId: try required(row.string(1), "caller_id"),
      calleeId: try required(row.string(2), "callee_id"), answeredBy: try row.string(3),
      video: try row.bool(4) == true, createdAt: try required(row.int64(5), "created_at"),
      answeredAt: try row.int64(6), endedAt: try row.int64(7),
      endReason: try row.string(8).map { EndReason(lenient: $0) }, durationMs: try row.int64(9),
      blocked: try row.values.count == 11 && row.bool(10) == true ? true : nil)
  }

  package static func required<T>(_ value: T?, _ column: String) throws -> T {
    guard let value else { throw PostgresError.decoding(column: column, message: "NULL in a NOT NULL column") }
    return value
  }

  /// Append-only, like the 1:1 history: a record already under the id is kept.
  package static func insertGroupCall(
    _ record: GroupCallRecord, silenced: Set<String> = [], on connection: PostgresConnection
  )
    throws
  {
    let inserted = try connection.query(
      """
      INSERT INTO group_calls (call_id, creator_id, title, room, video, created_at, ended_at, end_reason)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (call_id) DO NOTHING RETURNING call_id
      """,
      [
        .text(record.callId), .text(record.creatorId), PostgresValue(record.title), PostgresValue(record.room),
        .bool(record.video), .int64(record.createdAt), .int64(record.endedAt), .text(record.endReason.rawValue),
      ])
    guard !inserted.isEmpty else { return }
    for (position, member) in record.participants.enumerated() {
      try connection.query(
        """
        INSERT INTO group_call_members
          (call_id, position, user_id, outcome, device_id, joined_at, duration_ms, created_at, blocked)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        """,
        [
          .text(record.callId), .int64(Int64(position)), .text(member.userId), .text(member.outcome.rawValue),
          PostgresValue(member.deviceId), PostgresValue(member.joinedAt), PostgresValue(member.durationMs),
          .int64(record.createdAt), .bool(silenced.contains(member.userId)),
        ])
    }
  }

  /// The bound values of a history page's `(created_at < $a OR (created_at = $a AND call_id < $b))`.
  private static func page(_ cursor: HistoryCursor?) -> (PostgresValue, PostgresValue) {
    guard let cursor else { return (.int64(Int64.max), .text("")) }
    return (.int64(cursor.createdAt), .text(cursor.callId))
  }

  // MARK: - History

  public func history(
    of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory
  ) async throws -> [CallRecord] {
    let (createdAt, callId) = Self.page(cursor)
    return try await pool.run { connection in
      let columns = Self.callColumns
      let page = "(created_at < $2 OR (created_at = $2 AND call_id < $3))"
      // Two index range scans merged, rather than one OR over two columns.
      return try connection.query(
        """
        SELECT \(columns), silenced FROM (
          (SELECT \(columns), false AS silenced FROM calls WHERE caller_id = $1 AND \(page)
            ORDER BY created_at DESC, call_id DESC LIMIT $4)
          UNION
          (SELECT \(columns), blocked AS silenced FROM calls WHERE callee_id = $1 AND (NOT blocked OR $5) AND \(page)
            ORDER BY created_at DESC, call_id DESC LIMIT $4)
        ) AS page ORDER BY created_at DESC, call_id DESC LIMIT $4
        """, [.text(userId), createdAt, callId, .int64(Int64(limit)), .bool(blocked == .show)]
      ).map(Self.record)
    }
  }

  public func groupHistory(
    of userId: String, limit: Int, before cursor: HistoryCursor?, blocked: BlockedCallsInHistory
  ) async throws -> [GroupCallRecord] {
    let (createdAt, callId) = Self.page(cursor)
    return try await pool.run { connection in
      let calls = try connection.query(
        """
        SELECT g.call_id, g.creator_id, g.title, g.room, g.video, g.created_at, g.ended_at, g.end_reason, m.blocked
        FROM group_call_members m JOIN group_calls g ON g.call_id = m.call_id
        WHERE m.user_id = $1 AND (NOT m.blocked OR $2) AND (m.created_at < $3 OR (m.created_at = $3 AND m.call_id < $4))
        ORDER BY m.created_at DESC, m.call_id DESC LIMIT $5
        """, [.text(userId), .bool(blocked == .show), createdAt, callId, .int64(Int64(limit))])
      return try calls.map { row -> GroupCallRecord in
        let callId = try Self.required(row.string(0), "call_id")
        let members = try connection.query(
          """
          SELECT user_id, outcome, device_id, joined_at, duration_ms FROM group_call_members
          WHERE call_id = $1 ORDER BY position
          """, [.text(callId)])
        return GroupCallRecord(
          callId: callId, creatorId: try Self.required(row.string(1), "creator_id"), title: try row.string(2),
          room: try row.string(3), video: try row.bool(4) == true,
          createdAt: try Self.required(row.int64(5), "created_at"),
          endedAt: try Self.required(row.int64(6), "ended_at"),
          endReason: GroupEndReason(rawValue: try Self.required(row.string(7), "end_reason")) ?? .ended,
          participants: try members.compactMap { member in
            guard let user = try member.string(0), let outcome = try member.string(1).flatMap(GroupMemberState.init)
            else { return nil }
            return GroupParticipantRecord(
              userId: user, outcome: outcome, deviceId: try member.string(2), joinedAt: try member.int64(3),
              durationMs: try member.int64(4))
          },
          blocked: try row.bool(8) == true ? true : nil)
      }
    }
  }

  // MARK: - Devices

  public func upsert(
    installationId: String, platform: PushPlatform, tokens: [PushToken], userId: String, deviceId: String,
    now: Int64
  ) async throws -> StoredDevice {
    try await pool.run { connection in
      let owner: [PostgresValue] = [.text(userId), .text(installationId)]
      try connection.transaction {
        try PostgresSchema.lock(.devices, "", on: connection)
        // A token belongs to one installation: take it away from any other first.
        for token in tokens {
          try Self.release(token.token, kind: token.kind, except: (userId, installationId), on: connection)
        }
        try connection.query(
          """
          INSERT INTO devices (user_id, installation_id, device_id, platform, updated_at) VALUES ($1, $2, $3, $4, $5)
          ON CONFLICT (user_id, installation_id) DO UPDATE SET device_id = excluded.device_id,
            platform = excluded.platform, updated_at = excluded.updated_at
          """, owner + [.text(deviceId), .text(platform.rawValue), .int64(now)])
        // A registration replaces the installation's tokens as a whole.
        try connection.query("DELETE FROM push_tokens WHERE user_id = $1 AND installation_id = $2", owner)
        for token in tokens {
          try connection.query(
            """
            INSERT INTO push_tokens (user_id, installation_id, kind, token, topic, environment)
            VALUES ($1, $2, $3, $4, $5, $6)
            """,
            owner + [
              .text(token.kind.rawValue), .text(token.token), PostgresValue(token.topic),
              PostgresValue(token.environment),
            ])
        }
      }
      return StoredDevice(
        userId: userId, installationId: installationId, deviceId: deviceId, platform: platform, tokens: tokens,
        updatedAt: now)
    }
  }

  public func remove(installationId: String, userId: String) async throws -> Bool {
    try await pool.run { connection in
      let owner: [PostgresValue] = [.text(userId), .text(installationId)]
      return try connection.transaction {
        try PostgresSchema.lock(.devices, "", on: connection)
        try connection.query("DELETE FROM push_tokens WHERE user_id = $1 AND installation_id = $2", owner)
        return try !connection.query(
          "DELETE FROM devices WHERE user_id = $1 AND installation_id = $2 RETURNING 1", owner
        ).isEmpty
      }
    }
  }

  public func devices(of userId: String) async throws -> [StoredDevice] {
    try await pool.run { connection in
      var tokens: [String: [PushToken]] = [:]
      for row in try connection.query(
        """
        SELECT installation_id, kind, token, topic, environment FROM push_tokens WHERE user_id = $1
        ORDER BY installation_id, kind
        """, [.text(userId)])
      {
        guard let installation = try row.string(0), let kind = try row.string(1), let token = try row.string(2) else {
          continue
        }
        tokens[installation, default: []].append(
          PushToken(
            kind: PushTokenKind(rawValue: kind), token: token, topic: try row.string(3),
            environment: try row.string(4)))
      }
      return try connection.query(
        """
        SELECT installation_id, device_id, platform, updated_at FROM devices WHERE user_id = $1
        ORDER BY installation_id
        """, [.text(userId)]
      ).compactMap { row in
        guard let installation = try row.string(0), let device = try row.string(1),
          let platform = try row.string(2).flatMap(PushPlatform.init(rawValue:)), let updatedAt = try row.int64(3)
        else { return nil }
        return StoredDevice(
          userId: userId, installationId: installation, deviceId: device, platform: platform,
          tokens: tokens[installation] ?? [], updatedAt: updatedAt)
      }
    }
  }

  public func removeToken(_ token: String, kind: PushTokenKind) async throws {
    try await pool.run { connection in
      try connection.transaction {
        try PostgresSchema.lock(.devices, "", on: connection)
        try Self.release(token, kind: kind, except: nil, on: connection)
      }
    }
  }

  /// Deletes a token from whichever installation holds it (but `except`), and forgets that
  /// installation when it has no token left: it cannot be reached any more.
  private static func release(
    _ token: String, kind: PushTokenKind, except owner: (String, String)?, on connection: PostgresConnection
  ) throws {
    let key: [PostgresValue] = [.text(kind.rawValue), .text(token)]
    guard
      let row = try connection.query(
        "SELECT user_id, installation_id FROM push_tokens WHERE kind = $1 AND token = $2", key
      )
      .first,
      let user = try row.string(0), let installation = try row.string(1)
    else { return }
    if let owner, owner == (user, installation) { return }
    try connection.query("DELETE FROM push_tokens WHERE kind = $1 AND token = $2", key)
    try connection.query(
      """
      DELETE FROM devices WHERE user_id = $1 AND installation_id = $2 AND NOT EXISTS (
        SELECT 1 FROM push_tokens WHERE user_id = $1 AND installation_id = $2)
      """, [.text(user), .text(installation)])
  }
}

/// The database named by `--database-url` could not be opened at start.
public struct PostgresStoreError: Error, CustomStringConvertible {
  public let description: String

  package init(url: String, underlying: any Error) {
    description = "cannot open the PostgreSQL database \(Self.redacted(url)): \(underlying)"
  }

  /// The URL without its password, for logs.
  package static func redacted(_ url: String) -> String {
    guard var components = URLComponents(string: url), components.password != nil else { return url }
    components.password = "***"
    return components.string ?? url
  }
}
