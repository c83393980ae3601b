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

  /// Texts bound as they are: empty stays text (not NULL), non-ASCII and long texts whole, and
  /// a NUL ends the text as SQLite's length of -1 says (as before the binding lent the string's
  /// own storage).
  @Test func bindsTextsWhole() throws {
    let db = try SQLiteDatabase(path: temporaryPath())
    try db.execute("CREATE TABLE t (k INTEGER, b TEXT)")
    let long = String(repeating: "a=line \u{1F600}\r\n", count: 300)
    let texts = ["", "x", "héllo", "exactly fifteen", "sixteen bytes ok", long, String(repeating: "é", count: 40)]
    for (key, text) in texts.enumerated() {
      try db.query("INSERT INTO t VALUES (?, ?)", [.integer(Int64(key)), .text(text)])
    }
    let rows = try db.query("SELECT b, typeof(b) FROM t ORDER BY k")
    #expect(rows == texts.map { [.text($0), .text("text")] })
    try db.query("INSERT INTO t VALUES (99, ?)", [.text("before\u{0}after")])
    #expect(try db.query("SELECT b FROM t WHERE k = 99") == [[.text("before")]])
  }

  /// `query(constant:)` runs the same statements as `query` with the same text, each prepared
  /// once and reused with new parameters, side by side with the text-keyed ones.
  @Test func constantStatementsAnswerAsTheTextKeyedOnes() throws {
    let db = try SQLiteDatabase(path: temporaryPath())
    try db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    for a in 0..<20 {
      if a.isMultiple(of: 2) {
        try db.query(constant: "INSERT INTO t VALUES (?, ?)", [.integer(Int64(a)), .text("v\(a)")])
      } else {
        try db.query("INSERT INTO t VALUES (?, ?)", [.integer(Int64(a)), .text("v\(a)")])
      }
    }
    for a in 0..<20 {
      let byConstant = try db.query(constant: "SELECT b FROM t WHERE a = ?", [.integer(Int64(a))])
      let byText = try db.query("SELECT b FROM t WHERE a = ?", [.integer(Int64(a))])
      #expect(byConstant == [[.text("v\(a)")]])
      #expect(byConstant == byText)
    }
    #expect(try db.query(constant: "SELECT count(*) FROM t").first?.first?.int == 20)
    #expect(throws: SQLiteError.self) { try db.query(constant: "SELECT nothing FROM nowhere") }
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
