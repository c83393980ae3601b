import DialtonePostgres
import DialtoneTestSupport
import Foundation
import Testing

extension PostgresTests {
  @Suite struct Connection {
    private func connect() throws -> PostgresConnection {
      try PostgresConnection(url: SharedPostgres.server().freshSchema())
    }

    @Test func roundTripsEveryValueType() throws {
      let db = try connect()
      try db.execute("CREATE TABLE t (s text, i bigint, b boolean, d double precision, y bytea, n text)")
      let values: [PostgresValue] = [
        .text("héllo 'quoted' \"double\" \\ 😀 日本語 \u{7F}"), .int64(.min), .bool(true), .double(0.1 + 0.2),
        .bytes([0, 1, 39, 92, 127, 128, 255]), .null,
      ]
      try db.query("INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6)", values)
      let rows = try db.query("SELECT s, i, b, d, y, n FROM t")
      #expect(rows.count == 1)
      #expect(rows.first?.values == values)
      #expect(rows.first?.columns == ["s", "i", "b", "d", "y", "n"])
    }

    @Test func roundTripsEdgeValuesThroughParameters() throws {
      let db = try connect()
      let edges: [PostgresValue] = [
        .text(""), .bytes([]), .int64(.max), .int64(0), .bool(false), .double(.infinity), .double(-.infinity),
        .double(.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude), .double(-0.5), .text("NULL"),
      ]
      for value in edges {
        let cast =
          switch value {
          case .bytes: "::bytea"
          case .text: "::text"
          default: ""
          }
        let rows = try db.query("SELECT $1\(cast)", [value])
        #expect(rows.first?.values == [value], "\(value)")
      }
      // A lone empty bytea is a value, not NULL.
      #expect(try db.query("SELECT $1::bytea IS NULL", [.bytes([])]).first?.bool(0) == false)
      let nan = try db.query("SELECT $1", [.double(.nan)]).first?.double(0)
      #expect(nan?.isNaN == true)
    }

    @Test func decodesServerTypesIntoValues() throws {
      let db = try connect()
      let row = try #require(
        try db.query("SELECT 7::int2 AS a, 8::int4 AS b, 1.5::float4 AS c, 12.50::numeric AS d, NULL::int8 AS e").first)
      #expect(row.values == [.int64(7), .int64(8), .double(1.5), .text("12.50"), .null])
    }

    @Test func typedAccessorsByIndexAndName() throws {
      let db = try connect()
      let row = try #require(
        try db.query(
          "SELECT $1::text AS s, $2::bigint AS i, $3::bool AS b, $4::float8 AS d, $5::bytea AS y, NULL::text AS n",
          ["text", 42, true, 2.5, .bytes([1, 2])]
        ).first)
      #expect(try row.string("s") == "text")
      #expect(try row.string(0) == "text")
      #expect(try row.int64("i") == 42)
      #expect(try row.int64(1) == 42)
      #expect(try row.bool("b") == true)
      #expect(try row.bool(2) == true)
      #expect(try row.double("d") == 2.5)
      #expect(try row.double(3) == 2.5)
      #expect(try row.bytes("y") == [1, 2])
      #expect(try row.bytes(4) == [1, 2])
      #expect(try row.string("n") == nil)
      #expect(try row.int64(5) == nil)
      #expect(row[1] == .int64(42))
    }

    @Test func accessorsRejectAnotherTypeAndUnknownColumns() throws {
      let db = try connect()
      let row = try #require(try db.query("SELECT 'x'::text AS s, 1::bigint AS i").first)
      #expect(throws: PostgresError.self) { try row.int64("s") }
      #expect(throws: PostgresError.self) { try row.string("i") }
      #expect(throws: PostgresError.self) { try row.string("missing") }
      #expect(throws: PostgresError.self) { try row.string(7) }
    }

    @Test func aParameterNeverBecomesSQL() throws {
      let db = try connect()
      try db.execute("CREATE TABLE x (name text)")
      let hostile = "'; DROP TABLE x; --"
      try db.query("INSERT INTO x (name) VALUES ($1)", [.text(hostile)])
      let rows = try db.query("SELECT name FROM x WHERE name = $1", [.text(hostile)])
      #expect(try rows.map { try $0.string("name") } == [hostile])
      #expect(try db.query("SELECT count(*) FROM x").first?.int64(0) == 1)
    }

    @Test func refusesANulByteInsteadOfTruncating() throws {
      let db = try connect()
      #expect(
        throws: PostgresError.invalidRequest("parameter $1 contains a NUL byte, which PostgreSQL text cannot hold")
      ) {
        try db.query("SELECT $1", [.text("a\u{0}b")])
      }
      #expect(throws: PostgresError.self) { try db.query("SELECT 1\u{0}; DROP TABLE x") }
      #expect(try db.query("SELECT 1").first?.int64(0) == 1)
    }

    @Test func aSyntaxErrorCarriesItsSQLState() throws {
      let db = try connect()
      do throws(PostgresError) {
        try db.query("SELEC 1")
        Issue.record("no error")
      } catch {
        #expect(error.sqlState == "42601")
        #expect(error.isSyntaxError)
        #expect(!error.isConnectionLost)
      }
      #expect(try db.query("SELECT 2").first?.int64(0) == 2)
    }

    @Test func aUniqueViolationIsRecognised() throws {
      let db = try connect()
      try db.execute("CREATE TABLE u (id bigint PRIMARY KEY)")
      try db.query("INSERT INTO u VALUES ($1)", [1])
      do throws(PostgresError) {
        try db.query("INSERT INTO u VALUES ($1)", [1])
        Issue.record("no error")
      } catch {
        #expect(error.isUniqueViolation)
        guard case .server(_, let message, let detail) = error else {
          Issue.record("\(error)")
          return
        }
        #expect(message.contains("duplicate key"))
        #expect(detail?.contains("(id)=(1)") == true)
      }
    }

    @Test func executeRunsSeveralStatements() throws {
      let db = try connect()
      try db.execute("CREATE TABLE m (a int); INSERT INTO m VALUES (1); INSERT INTO m VALUES (2);")
      #expect(try db.query("SELECT sum(a)::bigint FROM m").first?.int64(0) == 3)
    }

    @Test func copyIsRefusedAndTheConnectionClosed() throws {
      let db = try connect()
      #expect(throws: PostgresError.self) { try db.query("COPY (SELECT 1) TO STDOUT") }
      #expect(!db.isAlive)
      #expect(throws: PostgresError.connectionLost(message: "the connection is closed")) { try db.query("SELECT 1") }
    }

    @Test func aRefusedConnectionFails() throws {
      let port = try LoopbackListener.freePort()
      let error = #expect(throws: PostgresError.self) {
        try PostgresConnection(url: "postgres://nobody@127.0.0.1:\(port)/db")
      }
      guard case .connectionFailed(let message) = error else {
        Issue.record("\(String(describing: error))")
        return
      }
      #expect(message.contains("refused"), "\(message)")
    }

    /// A server that accepts and then never answers: the connect timeout ends the wait.
    @Test func aSilentServerTimesOut() throws {
      let silent = try LoopbackListener()
      let error = #expect(throws: PostgresError.self) {
        try PostgresConnection(url: "postgres://nobody@127.0.0.1:\(silent.port)/db", connectTimeout: .seconds(2))
      }
      guard case .connectionFailed(let message) = error else {
        Issue.record("\(String(describing: error))")
        return
      }
      #expect(message.contains("timeout"), "\(message)")
    }
  }
}
