/// A value bound to a statement's `$n` parameter or read from a result column. Integers bind as
/// bigint, floats as double precision, bytes as bytea, text as an untyped literal (the server
/// infers its type): where a function wants another integer type, cast (`pg_cancel_backend($1::int)`).
public enum PostgresValue: Sendable, Hashable {
  case null
  case text(String)
  case int64(Int64)
  case bool(Bool)
  case double(Double)
  case bytes([UInt8])

  public var isNull: Bool { self == .null }
}

extension PostgresValue {
  /// NULL for nil: optional columns bind without a `map` at every call site.
  public init(_ text: String?) { self = text.map(PostgresValue.text) ?? .null }
  public init(_ integer: Int64?) { self = integer.map(PostgresValue.int64) ?? .null }
  public init(_ flag: Bool?) { self = flag.map(PostgresValue.bool) ?? .null }
  public init(_ number: Double?) { self = number.map(PostgresValue.double) ?? .null }
  public init(_ bytes: [UInt8]?) { self = bytes.map(PostgresValue.bytes) ?? .null }
}

extension PostgresValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
  ExpressibleByFloatLiteral, ExpressibleByNilLiteral
{
  public init(stringLiteral value: String) { self = .text(value) }
  public init(integerLiteral value: Int64) { self = .int64(value) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
  public init(floatLiteral value: Double) { self = .double(value) }
  public init(nilLiteral: ()) { self = .null }
}

/// The well-known type OIDs (pg_type.dat) the wrapper binds and decodes.
enum PostgresType {
  static let unknown: UInt32 = 0
  static let bool: UInt32 = 16
  static let bytea: UInt32 = 17
  static let int8: UInt32 = 20
  static let int2: UInt32 = 21
  static let int4: UInt32 = 23
  static let oid: UInt32 = 26
  static let float4: UInt32 = 700
  static let float8: UInt32 = 701
}
