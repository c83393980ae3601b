import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  /// A pipeline's statements are prepared once per connection and run by name after, so the
  /// server parses and plans them once (`PostgresConfiguration.preparedStatements`).
  @Suite struct PreparedStatements {
    private func connectWithTable(limit: Int = 256) throws -> PostgresConnection {
      let db = try PostgresConnection(
        PostgresConfiguration(url: SharedPostgres.server().freshSchema(), preparedStatements: limit))
      try db.execute("CREATE TABLE t (id bigint PRIMARY KEY, note text)")
      return db
    }

    private func ids(_ db: PostgresConnection) throws -> [Int64] {
      try db.query("SELECT id FROM t ORDER BY id").compactMap { try $0.int64(0) }
    }

    /// What the server holds for this session, but for this count's own statement.
    private func serverPrepared(_ db: PostgresConnection) throws -> Int64? {
      try db.query("SELECT count(*) FROM pg_prepared_statements WHERE statement NOT LIKE '%pg_prepared_statements%'")
        .first?.int64(0)
    }

    @Test func aStatementRunAgainIsPreparedOnceAndRunByName() throws {
      let db = try connectWithTable()
      for id in 1...3 {
        _ = try db.pipeline([PostgresStatement("INSERT INTO t (id) VALUES ($1)", [.int64(Int64(id))])])
      }
      #expect(db.preparedStatementCount == 1)
      #expect(try serverPrepared(db) == 1)
      #expect(try ids(db) == [1, 2, 3])
    }

    @Test func theSameStatementTwiceInOneFlightIsPreparedOnce() throws {
      let db = try connectWithTable()
      let results = try db.pipeline([
        PostgresStatement("INSERT INTO t (id) VALUES ($1)", [1]),
        PostgresStatement("INSERT INTO t (id) VALUES ($1)", [2]),
        PostgresStatement("SELECT count(*) FROM t"),
      ])
      #expect(try results[2].first?.int64(0) == 2)
      #expect(db.preparedStatementCount == 2)
      #expect(try serverPrepared(db) == 2)
    }

    /// A statement is prepared with its parameters' types: a number is another statement than a
    /// NULL or a text (both left to the server to type), and each binds as it would unprepared.
    @Test func otherParameterTypesGetTheirOwnStatement() throws {
      let db = try connectWithTable()
      let sql = "INSERT INTO t (id, note) VALUES ($1, $2)"
      _ = try db.pipeline([PostgresStatement(sql, [1, .null]), PostgresStatement(sql, [2, .text("two")])])
      _ = try db.pipeline([PostgresStatement(sql, [3, .int64(3)])])
      #expect(db.preparedStatementCount == 2)
      #expect(try db.query("SELECT note FROM t ORDER BY id").map { try $0.string(0) } == [nil, "two", "3"])
    }

    /// A statement the server cannot prepare is that flight's error, as it would be unprepared;
    /// nothing is recorded, and the connection goes on (the same name is never tried twice).
    @Test func aStatementThatFailsToPrepareIsTheFlightsErrorAndNothingIsRecorded() throws {
      let db = try connectWithTable()
      #expect(throws: PostgresError.self) {
        _ = try db.pipeline([
          PostgresStatement("INSERT INTO t (id) VALUES ($1)", [1]),
          PostgresStatement("INSERT INTO nowhere VALUES ($1)", [1]),
          PostgresStatement("INSERT INTO t (id) VALUES ($1)", [2]),
        ])
      }
      #expect(db.preparedStatementCount == 1)
      #expect(try ids(db).isEmpty)
      _ = try db.pipeline([PostgresStatement("INSERT INTO t (id) VALUES ($1)", [4])])
      #expect(try ids(db) == [4])
    }

    /// Prepared statements outlive the transaction that prepared them, rolled back or not.
    @Test func aStatementPreparedInARolledBackTransactionStillRuns() throws {
      struct Abort: Error {}
      let db = try connectWithTable()
      #expect(throws: Abort.self) {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t (id) VALUES ($1)", [1])
          _ = try transaction.flush()
          throw Abort()
        }
      }
      try db.pipelinedTransaction { transaction in transaction.append("INSERT INTO t (id) VALUES ($1)", [2]) }
      #expect(db.preparedStatementCount == 3)  // BEGIN, the insert, COMMIT
      #expect(try ids(db) == [2])
    }

    /// A single statement (`query`) is prepared the same way; one that cannot be is its error.
    @Test func aQueryIsPreparedOnceAndAFailedOneIsItsError() throws {
      let db = try connectWithTable()
      let before = db.preparedStatementCount  // the table's helpers' own statements
      for id in 1...3 { try db.query("INSERT INTO t (id) VALUES ($1)", [.int64(Int64(id))]) }
      #expect(db.preparedStatementCount == before + 1)
      #expect(throws: PostgresError.self) { try db.query("SELECT * FROM nowhere WHERE id = $1", [1]) }
      #expect(db.preparedStatementCount == before + 1)
      #expect(try ids(db) == [1, 2, 3])
      // In a transaction too, and a failure there aborts it as an unprepared one would.
      #expect(throws: PostgresError.self) {
        try db.transaction {
          try db.query("INSERT INTO t (id) VALUES ($1)", [4])
          try db.query("INSERT INTO nowhere VALUES ($1)", [4])
        }
      }
      #expect(try ids(db) == [1, 2, 3])
    }

    /// Past the limit the rest run unprepared: a connection handed ever new SQL keeps a bounded
    /// number of statements on the server; 0 prepares none.
    @Test func pastTheLimitStatementsRunUnprepared() throws {
      let db = try connectWithTable(limit: 2)
      for id in 1...5 {
        _ = try db.pipeline([PostgresStatement("INSERT INTO t (id) VALUES ($1 + \(id) - \(id))", [.int64(Int64(id))])])
      }
      #expect(try ids(db) == [1, 2, 3, 4, 5])
      #expect(db.preparedStatementCount == 2)
      #expect(try serverPrepared(db) == 2)

      // Within one flight too: the statements it prepares count against the limit as they go.
      let flight = try connectWithTable(limit: 2)
      _ = try flight.pipeline(
        (1...4).map { id in PostgresStatement("INSERT INTO t (id) VALUES ($1 + \(id) - \(id))", [.int64(Int64(id))]) })
      #expect(flight.preparedStatementCount == 2)
      #expect(try serverPrepared(flight) == 2)
      #expect(try ids(flight) == [1, 2, 3, 4])

      let none = try connectWithTable(limit: 0)
      _ = try none.pipeline([PostgresStatement("INSERT INTO t (id) VALUES ($1)", [1])])
      #expect(none.preparedStatementCount == 0)
      #expect(try serverPrepared(none) == 0)
    }
  }
}
