import DialtoneSQLite

@testable import DialtoneServer
@testable import DialtoneStorage

/// A database file as an earlier release left it, at `schema` (its migrations only, none after),
/// for upgrade tests to fill with that release's rows.
func oldDatabase(at path: String, schema: Int) throws -> SQLiteDatabase {
  let old = try SQLiteDatabase(path: path)
  try old.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
  for (index, sql) in SQLiteStore.migrations.prefix(schema).enumerated() {
    try old.execute(sql)
    try old.query("INSERT INTO schema_migrations VALUES (?, 0)", [.integer(Int64(index + 1))])
  }
  return old
}
