import DialtoneSQLite
import Foundation
import Testing

struct SQLiteDatabaseTests {
  private func temporaryPath() -> String {
    NSTemporaryDirectory() + "dialtone-sqlite-\(UUID().uuidString).db"
  }

  @Test func roundTripsValuesWithParameters() throws {
    let db = try SQLiteDatabase(path: temporaryPath())
    try db.execute("CREATE TABLE t (a INTEGER, b TEXT, c REAL, d TEXT)")
    try db.query("INSERT INTO t VALUES (?, ?, ?, ?)", [.integer(42), .text("héllo 'quoted'"), .real(1.5), .null])
    let rows = try db.query("SELECT a, b, c, d FROM t WHERE a = ?", [.integer(42)])
    #expect(rows == [[.integer(42), .text("héllo 'quoted'"), .real(1.5), .null]])
  }

  @Test func usesWALAndSurvivesReopen() throws {
    let path = temporaryPath()
    do {
      let db = try SQLiteDatabase(path: path)
      #expect(try db.query("PRAGMA journal_mode").first?.first?.string == "wal")
      try db.execute("CREATE TABLE t (a INTEGER)")
      try db.query("INSERT INTO t VALUES (1)")
    }
    let reopened = try SQLiteDatabase(path: path)
    #expect(try reopened.query("SELECT count(*) FROM t").first?.first?.int == 1)
  }

  @Test func rollsBackAFailedTransaction() throws {
    let db = try SQLiteDatabase(path: temporaryPath())
    try db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    #expect(throws: SQLiteError.self) {
      try db.transaction {
        try db.query("INSERT INTO t VALUES (1)")
        try db.query("INSERT INTO t VALUES (1)")
      }
    }
    #expect(try db.query("SELECT count(*) FROM t").first?.first?.int == 0)
  }

  /// The transaction's own statements are prepared once and reused: each transaction after a
  /// committed or a rolled-back one starts afresh, and what it commits is seen by another
  /// connection at once (no transaction is left open behind a statement not reset).
  @Test func transactionsOneAfterAnotherEachCommit() throws {
    let path = temporaryPath()
    let db = try SQLiteDatabase(path: path)
    try db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    let reader = try SQLiteDatabase(path: path)
    for value in 1...3 {
      _ = try db.transaction { try db.query("INSERT INTO t VALUES (?)", [.integer(Int64(value))]) }
      #expect(try reader.query("SELECT count(*) FROM t").first?.first?.int == Int64(value))
      #expect(throws: SQLiteError.self) {
        _ = try db.transaction { try db.query("INSERT INTO t VALUES (?)", [.integer(Int64(value))]) }
      }
    }
    #expect(try reader.query("SELECT count(*) FROM t").first?.first?.int == 3)
  }

  @Test func reportsErrorsClearly() throws {
    let db = try SQLiteDatabase(path: temporaryPath())
    #expect(throws: SQLiteError.self) { try db.query("SELECT * FROM missing") }
    #expect(throws: SQLiteError.self) { try SQLiteDatabase(path: "/nonexistent-dir/x.db") }
  }

  /// A WAL hook hears every commit with the WAL's length, and replaces SQLite's automatic
  /// checkpoint (which would have reset the WAL past 1,000 frames); `checkpoint()` copies the
  /// frames, and the next commit starts the WAL over.
  @Test func aWALHookHearsEachCommitAndLeavesCheckpointsToItsOwner() throws {
    let path = temporaryPath()
    let db = try SQLiteDatabase(path: path)
    try db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)")
    var lengths: [Int] = []
    db.onWALCommit { lengths.append($0) }
    for value in 1...1200 {
      try db.query("INSERT INTO t VALUES (?, ?)", [.integer(Int64(value)), .text(String(repeating: "x", count: 500))])
    }
    #expect(lengths.count == 1200)
    #expect(lengths == lengths.sorted())
    #expect(lengths.last ?? 0 > 1000)
    let other = try SQLiteDatabase(path: path)
    let (frames, copied) = try other.checkpoint()
    #expect(frames == lengths.last && copied == frames)
    try db.query("INSERT INTO t VALUES (0, 'again')")
    #expect(lengths.last ?? 0 < 10)
    #expect(try other.query("SELECT count(*) FROM t").first?.first?.int == 1201)
  }
}
