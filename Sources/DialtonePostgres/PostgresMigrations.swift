/// An append-only list of schema changes, applied in order, as SQLiteStore does: version N is the
/// N-th string, `schema_migrations` records what ran. Each runs in its own transaction under an
/// advisory lock, so nodes starting together apply every migration exactly once. A migration
/// must therefore be valid inside a transaction (no `CREATE INDEX CONCURRENTLY`).
public struct PostgresMigrations: Sendable {
  public let migrations: [String]
  /// The `pg_advisory_xact_lock` key; the default is "Dialtone" in ASCII.
  public let lockKey: Int64

  public init(_ migrations: [String], lockKey: Int64 = 0x4469_616C_746F_6E65) {
    self.migrations = migrations
    self.lockKey = lockKey
  }

  /// Applies the pending migrations; returns the schema version reached. A database already past
  /// the last known version (a newer node migrated it) is left alone.
  @discardableResult
  public func apply(on connection: PostgresConnection) throws(PostgresError) -> Int64 {
    while true {
      let (version, applied) = try connection.typedTransaction { () throws(PostgresError) -> (Int64, Bool) in
        let current = try lockedVersion(connection)
        guard current < Int64(migrations.count) else { return (current, false) }
        try connection.execute(migrations[Int(current)])
        try connection.query("INSERT INTO schema_migrations (version) VALUES ($1)", [.int64(current + 1)])
        return (current + 1, true)
      }
      if !applied { return version }
    }
  }

  /// The schema version recorded in the database (0 before any migration).
  public func version(on connection: PostgresConnection) throws(PostgresError) -> Int64 {
    try connection.typedTransaction { () throws(PostgresError) -> Int64 in try lockedVersion(connection) }
  }

  /// Takes the lock (held until the transaction ends), then reads the version.
  private func lockedVersion(_ connection: PostgresConnection) throws(PostgresError) -> Int64 {
    try connection.query("SELECT pg_advisory_xact_lock($1)", [.int64(lockKey)])
    try connection.execute(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    let rows = try connection.query("SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations")
    return try rows.first?.int64(0) ?? 0
  }
}
