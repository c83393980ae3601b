import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  /// The plain and the pipelined transaction make their own errors (nesting refused, 25P02 after a
  /// swallowed error) from one constructor each: the same error, to the letter, from both.
  @Suite struct TransactionErrors {
    private static let nested = PostgresError.invalidRequest(
      "a transaction is already open on this connection (nesting is not supported)")
    private static let abortedAndRolledBack = PostgresError.server(
      sqlState: "25P02", message: "the transaction was aborted by an earlier error and was rolled back", detail: nil)
    private static let abortedStillOpen = PostgresError.server(
      sqlState: "25P02", message: "the transaction was aborted by an earlier error", detail: nil)

    private func connectWithTable() throws -> PostgresConnection {
      let db = try PostgresConnection(url: SharedPostgres.server().freshSchema())
      try db.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
      return db
    }

    private func error(_ body: () throws -> Void) -> PostgresError? {
      do {
        try body()
        return nil
      } catch {
        return error as? PostgresError
      }
    }

    @Test func bothRefuseToNestWithTheSameError() throws {
      let db = try connectWithTable()
      let plainInPlain = error { try db.transaction { try db.transaction {} } }
      let pipelinedInPlain = error { try db.transaction { try db.pipelinedTransaction { _ in } } }
      let plainInPipelined = error {
        try db.pipelinedTransaction { transaction in try transaction.flushed().transaction {} }
      }
      #expect(plainInPlain == Self.nested)
      #expect(pipelinedInPlain == Self.nested)
      #expect(plainInPipelined == Self.nested)
    }

    @Test func bothReportASwallowedErrorAs25P02RolledBack() throws {
      let db = try connectWithTable()
      let plain = error {
        try db.transaction {
          try db.query("INSERT INTO t VALUES ($1)", [1])
          _ = try? db.query("INSERT INTO t VALUES ($1)", [1])
        }
      }
      let pipelined = error {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          _ = try? transaction.flush()
        }
      }
      #expect(plain == Self.abortedAndRolledBack)
      #expect(pipelined == Self.abortedAndRolledBack)
      #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
    }

    /// Inside the body the transaction is not rolled back yet: a flight after a failed one says so.
    @Test func aFlightAfterAFailedOneIs25P02StillOpen() throws {
      let db = try connectWithTable()
      var inside: PostgresError?
      _ = error {
        try db.pipelinedTransaction { transaction in
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          transaction.append("INSERT INTO t VALUES ($1)", [1])
          _ = try? transaction.flush()
          transaction.append("INSERT INTO t VALUES ($1)", [2])
          inside = error { _ = try transaction.flush() }
        }
      }
      #expect(inside == Self.abortedStillOpen)
      #expect(try db.query("SELECT count(*) FROM t").first?.int64(0) == 0)
    }
  }
}
