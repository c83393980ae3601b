import DialtonePostgres
import DialtoneTestSupport
import Testing

extension PostgresTests {
  @Suite struct Migrations {
    static let steps = [
      "CREATE TABLE a (id bigint PRIMARY KEY)",
      "ALTER TABLE a ADD COLUMN name text NOT NULL DEFAULT ''",
      // Not idempotent on its own: running it twice would fail on the primary key.
      "INSERT INTO a (id, name) VALUES (1, 'first')",
    ]

    @Test func applyInOrderOnceAndAreIdempotent() throws {
      let db = try PostgresConnection(url: SharedPostgres.server().freshSchema())
      let migrations = PostgresMigrations(Self.steps)
      #expect(try migrations.version(on: db) == 0)
      #expect(try migrations.apply(on: db) == 3)
      #expect(try migrations.apply(on: db) == 3)
      #expect(try db.query("SELECT count(*) FROM a").first?.int64(0) == 1)
      let versions = try db.query("SELECT version FROM schema_migrations ORDER BY version").map { try $0.int64(0) }
      #expect(versions == [1, 2, 3])

      let extended = PostgresMigrations(Self.steps + ["INSERT INTO a (id, name) VALUES (2, 'second')"])
      #expect(try extended.apply(on: db) == 4)
      #expect(try db.query("SELECT name FROM a ORDER BY id").map { try $0.string(0) } == ["first", "second"])
    }

    @Test func aFailingMigrationRollsBackAndStops() throws {
      let db = try PostgresConnection(url: SharedPostgres.server().freshSchema())
      let migrations = PostgresMigrations([
        "CREATE TABLE b (id int)", "CREATE TABLE c (id int); SELEC 1", "CREATE TABLE d (id int)",
      ])
      let error = #expect(throws: PostgresError.self) { try migrations.apply(on: db) }
      #expect(error?.isSyntaxError == true)
      #expect(try migrations.version(on: db) == 1)
      let tables = try db.query(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
      ).map { try $0.string(0) }
      #expect(tables == ["b", "schema_migrations"])
    }

    /// Two nodes starting at once: the advisory lock makes each migration run exactly once.
    @Test func concurrentRunnersApplyEachMigrationOnce() async throws {
      let url = try SharedPostgres.server().freshSchema()
      let migrations = PostgresMigrations(Self.steps)
      let versions = try await withThrowingTaskGroup(of: Int64.self) { group in
        for _ in 0..<2 {
          group.addTask {
            let db = try PostgresConnection(url: url)
            return try migrations.apply(on: db)
          }
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(versions == [3, 3])
      let db = try PostgresConnection(url: url)
      #expect(try db.query("SELECT count(*) FROM a").first?.int64(0) == 1)
      #expect(try db.query("SELECT count(*) FROM schema_migrations").first?.int64(0) == 3)
    }
  }
}
