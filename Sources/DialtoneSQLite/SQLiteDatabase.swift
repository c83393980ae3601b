import CSQLite
import Foundation

public struct SQLiteError: Error, Sendable, CustomStringConvertible {
  public let code: Int32
  public let message: String
  public var description: String { "sqlite error \(code): \(message)" }
}

/// A value bound to or read from a statement.
public enum SQLiteValue: Sendable, Equatable {
  case null
  case integer(Int64)
  case real(Double)
  case text(String)

  public var int: Int64? {
    if case .integer(let v) = self { return v }
    return nil
  }
  public var string: String? {
    if case .text(let v) = self { return v }
    return nil
  }
}

extension SQLiteValue {
  /// NULL for nil: optional columns bind without a `map` at every call site.
  public init(_ text: String?) { self = text.map(SQLiteValue.text) ?? .null }
  public init(_ integer: Int64?) { self = integer.map(SQLiteValue.integer) ?? .null }
}

public typealias SQLiteRow = [SQLiteValue]

/// One SQLite connection. Not thread-safe by design: its owner (an actor) serialises access.
public final class SQLiteDatabase {
  private var handle: OpaquePointer?
  private var statements: [String: OpaquePointer] = [:]
  /// Statements of constant SQL (`query(constant:)`), by the address of the text in the binary:
  /// a look-up hashes one pointer where `statements` hashes the whole text (SipHash over the
  /// journal's ~700-byte upsert, for every call it journals). The text of a `StaticString` with a
  /// pointer is immortal, so an address always means the same SQL.
  private var constantStatements: [UnsafeRawPointer: OpaquePointer] = [:]
  /// What `onWALCommit` set, retained for SQLite's hook until the connection closes.
  private var walHook: Unmanaged<WALHook>?

  /// Opens (creating if needed) the database at `path`, in WAL mode.
  public init(path: String) throws(SQLiteError) {
    var db: OpaquePointer?
    let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
    let rc = sqlite3_open_v2(path, &db, flags, nil)
    guard rc == SQLITE_OK, let db else {
      let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
      sqlite3_close(db)
      throw SQLiteError(code: rc, message: "\(path): \(message)")
    }
    handle = db
    // Errors carry the extended code (e.g. 522, a short read, rather than 10, "disk I/O error").
    sqlite3_extended_result_codes(db, 1)
    sqlite3_busy_timeout(db, 5000)
    try execute("PRAGMA journal_mode=WAL")
    try execute("PRAGMA synchronous=NORMAL")
    try execute("PRAGMA foreign_keys=ON")
  }

  deinit {
    for statement in statements.values { sqlite3_finalize(statement) }
    for statement in constantStatements.values { sqlite3_finalize(statement) }
    sqlite3_close(handle)
    walHook?.release()
  }

  /// Calls `body` on the committing thread after each transaction this connection commits, with
  /// the number of frames the WAL then holds. It replaces SQLite's automatic checkpoint on this
  /// connection: a connection with a hook leaves checkpoints to whoever calls `checkpoint()`.
  public func onWALCommit(_ body: @escaping (Int) -> Void) {
    let hook = Unmanaged.passRetained(WALHook(body))
    sqlite3_wal_hook(
      handle,
      { context, _, _, frames in
        if let context { Unmanaged<WALHook>.fromOpaque(context).takeUnretainedValue().body(Int(frames)) }
        return SQLITE_OK
      }, hook.toOpaque())
    walHook?.release()
    walHook = hook
  }

  /// Copies what the WAL holds into the database file, as far as readers let it, without waiting
  /// for them or for a writer (a passive checkpoint); the frames in the WAL and how many of them
  /// are now copied.
  @discardableResult
  public func checkpoint() throws(SQLiteError) -> (walFrames: Int, copied: Int) {
    var frames: Int32 = 0
    var copied: Int32 = 0
    let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied)
    guard rc == SQLITE_OK else { throw lastError(rc) }
    return (Int(frames), Int(copied))
  }

  /// Runs one or more statements without results.
  public func execute(_ sql: String) throws(SQLiteError) {
    var errorMessage: UnsafeMutablePointer<CChar>?
    let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
    if rc != SQLITE_OK {
      let message = errorMessage.map { String(cString: $0) } ?? "exec failed"
      sqlite3_free(errorMessage)
      throw SQLiteError(code: rc, message: message)
    }
  }

  /// Runs a statement with bound parameters; returns the rows it produced.
  @discardableResult
  public func query(_ sql: String, _ parameters: [SQLiteValue] = []) throws(SQLiteError) -> [SQLiteRow] {
    try query(prepared: try prepared(sql), parameters)
  }

  /// `query` for SQL written in the source, the statement found by the text's address rather
  /// than by its contents (`constantStatements`). For the statements run for every call.
  @discardableResult
  public func query(constant sql: StaticString, _ parameters: [SQLiteValue] = []) throws(SQLiteError) -> [SQLiteRow] {
    try query(prepared: try prepared(constant: sql), parameters)
  }

  private func query(prepared statement: OpaquePointer, _ parameters: [SQLiteValue]) throws(SQLiteError)
    -> [SQLiteRow]
  {
    defer {
      sqlite3_reset(statement)
      sqlite3_clear_bindings(statement)
    }
    for (index, value) in parameters.enumerated() {
      let position = Int32(index + 1)
      let rc: Int32
      switch value {
      case .null: rc = sqlite3_bind_null(statement, position)
      case .integer(let v): rc = sqlite3_bind_int64(statement, position, v)
      case .real(let v): rc = sqlite3_bind_double(statement, position, v)
      case .text(let v):
        // Through `withCString`, which lends a native string's own NUL-terminated storage: a
        // `String` passed straight as the pointer argument was first copied into a new array
        // (`utf8CString`), an allocation for every text bound (~20 per journaled call).
        rc = v.withCString { sqlite3_bind_text(statement, position, $0, -1, dt_sqlite_transient()) }
      }
      guard rc == SQLITE_OK else { throw lastError(rc) }
    }
    var rows: [SQLiteRow] = []
    while true {
      let rc = sqlite3_step(statement)
      if rc == SQLITE_DONE { break }
      guard rc == SQLITE_ROW else { throw lastError(rc) }
      let columns = sqlite3_column_count(statement)
      var row: SQLiteRow = []
      row.reserveCapacity(Int(columns))
      for column in 0..<columns {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
        case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
        case SQLITE_TEXT:
          if let text = sqlite3_column_text(statement, column) {
            row.append(.text(String(cString: text)))
          } else {
            row.append(.null)
          }
        default: row.append(.null)
        }
      }
      rows.append(row)
    }
    return rows
  }

  /// Runs `body` in a transaction, rolled back if it throws. The three statements are prepared
  /// once: `sqlite3_exec` would parse them again for every transaction, and the journal runs one
  /// for every few call changes.
  public func transaction<T>(_ body: () throws -> T) throws -> T {
    try run("BEGIN IMMEDIATE")
    do {
      let result = try body()
      try run("COMMIT")
      return result
    } catch {
      try? run("ROLLBACK")
      throw error
    }
  }

  /// Runs one cached statement that takes no parameters and returns no rows.
  private func run(_ sql: StaticString) throws(SQLiteError) {
    let statement = try prepared(constant: sql)
    defer { sqlite3_reset(statement) }
    let rc = sqlite3_step(statement)
    guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw lastError(rc) }
  }

  public var changes: Int { Int(sqlite3_changes(handle)) }

  private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
    if let cached = statements[sql] { return cached }
    var statement: OpaquePointer?
    let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
    guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
    statements[sql] = statement
    return statement
  }

  private func prepared(constant sql: StaticString) throws(SQLiteError) -> OpaquePointer {
    // A one-scalar literal has no pointer: it goes by its text like any other.
    guard sql.hasPointerRepresentation else { return try prepared(sql.description) }
    let key = UnsafeRawPointer(sql.utf8Start)
    if let cached = constantStatements[key] { return cached }
    var statement: OpaquePointer?
    let rc = sql.utf8Start.withMemoryRebound(to: CChar.self, capacity: sql.utf8CodeUnitCount) {
      sqlite3_prepare_v2(handle, $0, Int32(sql.utf8CodeUnitCount), &statement, nil)
    }
    guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
    constantStatements[key] = statement
    return statement
  }

  private func lastError(_ rc: Int32) -> SQLiteError {
    SQLiteError(code: rc, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "unknown")
  }
}

/// The body of a WAL hook, boxed for SQLite's context pointer.
private final class WALHook {
  let body: (Int) -> Void
  init(_ body: @escaping (Int) -> Void) { self.body = body }
}
