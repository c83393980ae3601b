/// The statements one connection has prepared, by their SQL and parameter
/// types (a statement is prepared with its types, so a run with other types needs its own). At
/// most `limit` are prepared: a connection given ever new SQL runs the rest unprepared rather
/// than growing the server's memory and its own without bound.
struct PreparedStatements {
  struct Key: Hashable {
    let sql: String
    let types: [UInt32]
  }

  enum Use: Equatable {
    /// Prepared already, under this name.
    case prepared(String)
    /// Prepare it under this name first (and record it with `prepared` once the server did).
    case prepare(Key, String)
    /// Run it unprepared: the limit is reached.
    case unprepared
  }

  let limit: Int
  private var names: [Key: String] = [:]
  private var issued = 0

  init(limit: Int) { self.limit = max(0, limit) }

  var count: Int { names.count }

  /// `preparing`: how many this connection is preparing already and has not recorded yet (a
  /// flight's), which count against the limit as the prepared do.
  mutating func use(sql: String, types: [UInt32], preparing: Int = 0) -> Use {
    let key = Key(sql: sql, types: types)
    if let name = names[key] { return .prepared(name) }
    guard names.count + preparing < limit else { return .unprepared }
    // A fresh name each time, never one the server may still hold from an attempt that failed.
    issued += 1
    return .prepare(key, "dt_\(issued)")
  }

  mutating func prepared(_ key: Key, as name: String) {
    guard names.count < limit else { return }
    names[key] = name
  }
}
