import DialtonePostgres

/// The PostgreSQL store's schema: SQLiteStore's tables as its migrations leave them, in one
/// first version (PostgreSQL databases start at it). Append, never edit.
///
/// Identifiers compare and sort byte by byte (`COLLATE "C"`), as in SQLite, whatever the
/// database's locale: history cursors and every ORDER BY depend on it. SQLite's rowid order
/// (when a call ended, signals in order, a directory version's changes in order) is a `seq`
/// column.
package enum PostgresSchema {
  package static let migrations = PostgresMigrations([
    """
    CREATE TABLE calls (
      seq BIGSERIAL NOT NULL UNIQUE,
      call_id TEXT COLLATE "C" PRIMARY KEY,
      caller_id TEXT COLLATE "C" NOT NULL,
      callee_id TEXT COLLATE "C" NOT NULL,
      answered_by TEXT,
      video BOOLEAN NOT NULL,
      created_at BIGINT NOT NULL,
      answered_at BIGINT,
      ended_at BIGINT,
      end_reason TEXT,
      duration_ms BIGINT,
      caller_device TEXT,
      blocked BOOLEAN NOT NULL DEFAULT false
    );
    CREATE INDEX calls_by_caller ON calls (caller_id, created_at DESC, call_id DESC);
    CREATE INDEX calls_by_callee ON calls (callee_id, created_at DESC, call_id DESC);
    CREATE INDEX calls_by_creation ON calls (created_at DESC, call_id DESC);

    CREATE TABLE devices (
      user_id TEXT COLLATE "C" NOT NULL,
      installation_id TEXT COLLATE "C" NOT NULL,
      device_id TEXT NOT NULL,
      platform TEXT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (user_id, installation_id)
    );
    CREATE TABLE push_tokens (
      user_id TEXT COLLATE "C" NOT NULL,
      installation_id TEXT COLLATE "C" NOT NULL,
      kind TEXT COLLATE "C" NOT NULL,
      token TEXT COLLATE "C" NOT NULL,
      topic TEXT,
      environment TEXT,
      PRIMARY KEY (user_id, installation_id, kind),
      UNIQUE (kind, token)
    );

    CREATE TABLE group_calls (
      call_id TEXT COLLATE "C" PRIMARY KEY,
      creator_id TEXT NOT NULL,
      title TEXT,
      room TEXT,
      video BOOLEAN NOT NULL,
      created_at BIGINT NOT NULL,
      ended_at BIGINT NOT NULL,
      end_reason TEXT NOT NULL
    );
    CREATE TABLE group_call_members (
      call_id TEXT COLLATE "C" NOT NULL REFERENCES group_calls (call_id),
      position BIGINT NOT NULL,
      user_id TEXT COLLATE "C" NOT NULL,
      outcome TEXT NOT NULL,
      device_id TEXT,
      joined_at BIGINT,
      duration_ms BIGINT,
      created_at BIGINT NOT NULL,
      blocked BOOLEAN NOT NULL DEFAULT false,
      PRIMARY KEY (call_id, user_id)
    );
    CREATE INDEX group_call_members_by_user ON group_call_members (user_id, created_at DESC, call_id DESC);

    CREATE TABLE live_calls (
      call_id TEXT COLLATE "C" PRIMARY KEY,
      caller_id TEXT NOT NULL,
      caller_device TEXT NOT NULL,
      caller_name TEXT,
      callee_id TEXT NOT NULL,
      video BOOLEAN NOT NULL,
      created_at BIGINT NOT NULL,
      phase TEXT NOT NULL,
      answered_by TEXT,
      answered_at BIGINT,
      ring_deadline BIGINT NOT NULL,
      caller_grace_deadline BIGINT,
      answerer_grace_deadline BIGINT,
      invite TEXT NOT NULL,
      accept TEXT,
      blocked BOOLEAN NOT NULL DEFAULT false
    );
    CREATE TABLE live_call_signals (
      seq BIGSERIAL PRIMARY KEY,
      call_id TEXT COLLATE "C" NOT NULL,
      message TEXT NOT NULL
    );
    CREATE INDEX live_call_signals_by_call ON live_call_signals (call_id);
    CREATE TABLE live_group_calls (
      call_id TEXT COLLATE "C" PRIMARY KEY,
      record TEXT NOT NULL,
      silenced TEXT NOT NULL DEFAULT ''
    );

    CREATE TABLE call_quality (
      call_id TEXT COLLATE "C" NOT NULL,
      user_id TEXT COLLATE "C" NOT NULL,
      device_id TEXT COLLATE "C" NOT NULL,
      role TEXT COLLATE "C" NOT NULL,
      final BOOLEAN NOT NULL,
      received_at BIGINT NOT NULL,
      report TEXT NOT NULL,
      PRIMARY KEY (call_id, user_id, device_id)
    );

    CREATE TABLE blocks (
      user_id TEXT COLLATE "C" NOT NULL,
      blocked_id TEXT COLLATE "C" NOT NULL,
      created_at BIGINT NOT NULL,
      PRIMARY KEY (user_id, blocked_id)
    );

    CREATE TABLE directory_versions (
      user_id TEXT COLLATE "C" PRIMARY KEY,
      version BIGINT NOT NULL,
      floor BIGINT NOT NULL
    );
    CREATE TABLE directory_entries (
      user_id TEXT COLLATE "C" NOT NULL,
      kind TEXT COLLATE "C" NOT NULL,
      number BIGINT NOT NULL,
      label TEXT NOT NULL,
      PRIMARY KEY (user_id, kind, number)
    );
    CREATE TABLE directory_changes (
      seq BIGSERIAL PRIMARY KEY,
      user_id TEXT COLLATE "C" NOT NULL,
      version BIGINT NOT NULL,
      kind TEXT NOT NULL,
      number BIGINT NOT NULL,
      op TEXT NOT NULL
    );
    CREATE INDEX directory_changes_by_user ON directory_changes (user_id, version);
    """,
    // 2: the fencing token of a live call's owner (`PostgresLiveCallStore.takeOver`).
    """
    ALTER TABLE live_calls ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
    """,
    // 3: a live group call's state, for the node that takes it over, and its owner's epoch.
    """
    ALTER TABLE live_group_calls ADD COLUMN state TEXT;
    ALTER TABLE live_group_calls ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
    """,
  ])

  /// `pg_advisory_xact_lock(class, hashtext(key))` classes: what one transaction checks and
  /// then changes, which SQLiteStore's single connection serialises and PostgreSQL's concurrent
  /// ones must not interleave. A hash collision only serialises two unrelated keys.
  package enum LockClass: Int64 {
    /// Every device write: a token moves between any two installations.
    case devices = 1
    /// One user's blocks (the limit).
    case blocks = 2
    /// One call's quality reports (the devices bound).
    case quality = 3
    /// One user's directory (its version).
    case directory = 4
    /// One live call's writes and take-overs (its epoch).
    case liveCall = 5
  }

  package static func lock(_ lockClass: LockClass, _ key: String, on connection: PostgresConnection) throws {
    let statement = lockStatement(lockClass, key)
    try connection.query(statement.sql, statement.parameters)
  }

  /// The same as a statement, for a pipelined transaction.
  package static func lockStatement(_ lockClass: LockClass, _ key: String) -> PostgresStatement {
    PostgresStatement("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [.int64(lockClass.rawValue), .text(key)])
  }
}
