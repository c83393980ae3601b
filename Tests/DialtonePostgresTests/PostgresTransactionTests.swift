import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  @Suite struct Transaction {
    struct Abort: Error, Equatable {}

    private func connectWithTable() throws -> PostgresConnection {
      let db = try PostgresConnection(url: SharedPostgres.server().freshSchema())
      try db.execute("CREATE TABLE t (id bigint PRIMARY KEY)")
      return db
    }

    private func count(_ db: PostgresConnection) throws -> Int64? {
      try db.query("SELECT count(*) FROM t").first?.int64(0)
    }

    @Test func commitsWhatTheBodyDid() throws {
      let db = try connectWithTable()
      let result = try db.transaction {
        try db.query("INSERT INTO t VALUES ($1), ($2)", [1, 2])
        return "done"
      }
      #expect(result == "done")
      #expect(try count(db) == 2)
    }

    @Test func rollsBackWhenTheBodyThrows() throws {
      let db = try connectWithTable()
      #expect(throws: Abort()) {
        try db.transaction {
          try db.query("INSERT INTO t VALUES ($1)", [1])
          throw Abort()
        }
      }
      #expect(try count(db) == 0)
      // The connection is usable again, outside any transaction.
      try db.query("INSERT INTO t VALUES ($1)", [1])
      #expect(try count(db) == 1)
    }

    @Test func aSwallowedErrorStillRollsBack() throws {
      let db = try connectWithTable()
      do {
        try db.transaction {
          try db.query("INSERT INTO t VALUES ($1)", [1])
          _ = try? db.query("INSERT INTO t VALUES ($1)", [1])
        }
        Issue.record("the transaction reported a commit")
      } catch {
        #expect((error as? PostgresError)?.sqlState == "25P02")
      }
      #expect(try count(db) == 0)
    }

    @Test func refusesToNest() throws {
      let db = try connectWithTable()
      #expect(throws: PostgresError.self) {
        try db.transaction {
          try db.query("INSERT INTO t VALUES ($1)", [1])
          try db.transaction {}
        }
      }
      #expect(try count(db) == 0)
    }
  }
}
