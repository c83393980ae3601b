import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  /// Statements sent in one flight (pipeline mode), and transactions made of such flights.
  @Suite struct Pipeline {
    struct Abort: Error, Equatable {}

    private func connectWithTable() throws -> PostgresConnection {
      let db = try PostgresConnection(url: SharedPostgres.server().freshSchema())
      try db.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
      return db
    }

    private func ids(_ db: PostgresConnection) throws -> [Int64] {
      try db.query("SELECT id FROM t ORDER BY id").compactMap { try $0.int64(0) }
    }

    @Test func returnsEachStatementsRowsInOrder() throws {
      let db = try connectWithTable()
      let results = try db.pipeline([
        PostgresStatement("INSERT INTO t VALUES ($1), ($2)", [1, 2]),
        PostgresStatement("SELECT count(*) FROM t"),
        PostgresStatement("SELECT $1::text, $2::bigint", ["x", 7]),
      ])
      #expect(results.count == 3)
      #expect(results[0].isEmpty)
      #expect(try results[1].first?.int64(0) == 2)
      #expect(try results[2].first?.string(0) == "x" && results[2].first?.int64(1) == 7)
    }

    /// Outside a transaction the flight is one implicit transaction: an error undoes it whole.
    @Test func anErrorOutsideATransactionUndoesTheWholeFlight() throws {
      let db = try connectWithTable()
      do {
        _ = try db.pipeline([
          PostgresStatement("INSERT INTO t VALUES ($1)", [1]),
          PostgresStatement("INSERT INTO t VALUES ($1)", [1]),
          PostgresStatement("INSERT INTO t VALUES ($1)", [2]),
        ])
        Issue.record("the duplicate key was not reported")
      } catch {
        #expect(error.isUniqueViolation)
      }
      #expect(try ids(db).isEmpty)
      // Usable again, out of pipeline mode: a plain statement and another flight both work.
      try db.query("INSERT INTO t VALUES ($1)", [3])
      _ = try db.pipeline([PostgresStatement("INSERT INTO t VALUES ($1)", [4])])
      #expect(try ids(db) == [3, 4])
    }

    @Test func refusesNulBytesAndOverlongFlightsBeforeSendingAnything() throws {
      let db = try connectWithTable()
      #expect(throws: PostgresError.self) {
        _ = try db.pipeline([PostgresStatement("INSERT INTO t VALUES (1)"), PostgresStatement("SELECT '\u{0}'")])
      }
      let tooMany = Array(
        repeating: PostgresStatement("INSERT INTO t VALUES (1)"), count: PostgresConnection.maximumPipelineLength + 1)
      #expect(throws: PostgresError.self) { _ = try db.pipeline(tooMany) }
      #expect(try ids(db).isEmpty)
    }

    @Test func aPipelinedTransactionCommitsEveryFlight() throws {
      let db = try connectWithTable()
      let counted = try db.pipelinedTransaction { transaction in
        transaction.append("INSERT INTO t VALUES ($1)", [1])
        let position = transaction.append("SELECT count(*) FROM t")
        let first = try transaction.flush()
        transaction.append("INSERT INTO t VALUES ($1)", [2])
        return try first[position].first?.int64(0)
      }
      #expect(counted == 1)
      #expect(try ids(db) == [1, 2])
    }

    /// The error of a statement in the middle of the last flight: reported, nothing of any flight
    /// kept (the COMMIT queued behind it was skipped and the transaction rolled back), the
    /// connection usable after.
    @Test func aStatementErrorMidFlightRollsBackEverything() throws {
      let db = try connectWithTable()
      do {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          _ = try transaction.flush()
          transaction.append("INSERT INTO t VALUES ($1)", [2])
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          transaction.append("INSERT INTO t VALUES ($1)", [3])
        }
        Issue.record("the duplicate key was not reported")
      } catch {
        #expect((error as? PostgresError)?.isUniqueViolation == true)
      }
      #expect(try ids(db).isEmpty)
      try db.query("INSERT INTO t VALUES ($1)", [5])
      try db.pipelinedTransaction { transaction in transaction.append("INSERT INTO t VALUES ($1)", [6]) }
      #expect(try ids(db) == [5, 6])
    }

    @Test func aSwallowedFlightErrorStillRollsBack() throws {
      let db = try connectWithTable()
      do {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          _ = try? transaction.flush()
          transaction.append("INSERT INTO t VALUES ($1)", [2])
        }
        Issue.record("the transaction reported a commit")
      } catch {
        #expect((error as? PostgresError)?.sqlState == "25P02")
      }
      #expect(try ids(db).isEmpty)
      try db.query("INSERT INTO t VALUES ($1)", [3])
      #expect(try ids(db) == [3])
    }

    @Test func aBodyThatThrowsRollsBackWhatWasFlushed() throws {
      let db = try connectWithTable()
      #expect(throws: Abort()) {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          // Statements run on the connection itself after a flush belong to the transaction.
          try transaction.flushed().query("INSERT INTO t VALUES ($1)", [2])
          throw Abort()
        }
      }
      #expect(try ids(db).isEmpty)
      try db.query("INSERT INTO t VALUES ($1)", [3])
      #expect(try ids(db) == [3])
    }

    /// More statements than one flight holds travel in several, in one transaction.
    @Test func aLongTransactionIsSplitIntoFlights() throws {
      let db = try connectWithTable()
      let total = PostgresConnection.maximumPipelineLength * 2 + 10
      try db.pipelinedTransaction { transaction in
        for id in 0..<total { transaction.append("INSERT INTO t VALUES ($1)", [.int64(Int64(id))]) }
      }
      #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == Int64(total))
    }

    @Test func refusesToNestInAnOpenTransaction() throws {
      let db = try connectWithTable()
      #expect(throws: PostgresError.self) {
        try db.transaction {
          try db.pipelinedTransaction { transaction in transaction.append("INSERT INTO t VALUES ($1)", [1]) }
        }
      }
      #expect(try ids(db).isEmpty)
    }
  }
}
