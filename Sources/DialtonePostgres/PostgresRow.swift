/// One result row. Values were decoded from the column types the server reported: integers
/// (int2/int4/int8/oid) as `.int64`, bool, float4/float8 as `.double`, bytea as `.bytes`, every
/// other type as its text form (`numeric`, `uuid`, `timestamptz`, ...: cast in SQL for another).
public struct PostgresRow: Sendable, Hashable {
  public let columns: [String]
  public let values: [PostgresValue]

  public init(columns: [String], values: [PostgresValue]) {
    self.columns = columns
    self.values = values
  }

  public subscript(index: Int) -> PostgresValue { values[index] }

  /// The value of column `index`, or a decoding error if there is no such column.
  public func value(_ index: Int) throws(PostgresError) -> PostgresValue {
    guard values.indices.contains(index) else {
      throw .decoding(column: "#\(index)", message: "the row has \(values.count) columns")
    }
    return values[index]
  }

  /// The value of the first column called `name`.
  public func value(_ name: String) throws(PostgresError) -> PostgresValue {
    guard let index = columns.firstIndex(of: name) else {
      throw .decoding(column: name, message: "no such column (columns: \(columns.joined(separator: ", ")))")
    }
    return values[index]
  }

  // Typed accessors: nil for NULL, an error for a value of another type (never a silent nil).

  public func string(_ index: Int) throws(PostgresError) -> String? {
    try Self.decode(value(index), "#\(index)", "text") { if case .text(let v) = $0 { v } else { nil } }
  }
  public func string(_ name: String) throws(PostgresError) -> String? {
    try Self.decode(value(name), name, "text") { if case .text(let v) = $0 { v } else { nil } }
  }
  public func int64(_ index: Int) throws(PostgresError) -> Int64? {
    try Self.decode(value(index), "#\(index)", "an integer") { if case .int64(let v) = $0 { v } else { nil } }
  }
  public func int64(_ name: String) throws(PostgresError) -> Int64? {
    try Self.decode(value(name), name, "an integer") { if case .int64(let v) = $0 { v } else { nil } }
  }
  public func bool(_ index: Int) throws(PostgresError) -> Bool? {
    try Self.decode(value(index), "#\(index)", "a bool") { if case .bool(let v) = $0 { v } else { nil } }
  }
  public func bool(_ name: String) throws(PostgresError) -> Bool? {
    try Self.decode(value(name), name, "a bool") { if case .bool(let v) = $0 { v } else { nil } }
  }
  public func double(_ index: Int) throws(PostgresError) -> Double? {
    try Self.decode(value(index), "#\(index)", "a float") { if case .double(let v) = $0 { v } else { nil } }
  }
  public func double(_ name: String) throws(PostgresError) -> Double? {
    try Self.decode(value(name), name, "a float") { if case .double(let v) = $0 { v } else { nil } }
  }
  public func bytes(_ index: Int) throws(PostgresError) -> [UInt8]? {
    try Self.decode(value(index), "#\(index)", "bytea") { if case .bytes(let v) = $0 { v } else { nil } }
  }
  public func bytes(_ name: String) throws(PostgresError) -> [UInt8]? {
    try Self.decode(value(name), name, "bytea") { if case .bytes(let v) = $0 { v } else { nil } }
  }

  private static func decode<T>(
    _ value: PostgresValue, _ column: String, _ expected: String, _ extract: (PostgresValue) -> T?
  ) throws(PostgresError) -> T? {
    if value == .null { return nil }
    guard let typed = extract(value) else { throw .decoding(column: column, message: "\(value) is not \(expected)") }
    return typed
  }
}
