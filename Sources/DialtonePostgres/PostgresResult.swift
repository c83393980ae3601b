import CPostgres

/// Reading a PGresult: its rows, or the error it carries. The result is not freed here.
enum PostgresResult {
  static func rows(of result: OpaquePointer) throws(PostgresError) -> [PostgresRow] {
    let rowCount = PQntuples(result)
    let columnCount = PQnfields(result)
    let columns = (0..<columnCount).map { PQfname(result, $0).map { String(cString: $0) } ?? "?column?" }
    let types = (0..<columnCount).map { PQftype(result, $0) }
    var rows: [PostgresRow] = []
    rows.reserveCapacity(Int(rowCount))
    for row in 0..<rowCount {
      var values: [PostgresValue] = []
      values.reserveCapacity(Int(columnCount))
      for column in 0..<columnCount {
        guard PQgetisnull(result, row, column) == 0, let text = PQgetvalue(result, row, column) else {
          values.append(.null)
          continue
        }
        let length = Int(PQgetlength(result, row, column))
        values.append(try decode(text, length: length, type: types[Int(column)], column: columns[Int(column)]))
      }
      rows.append(PostgresRow(columns: columns, values: values))
    }
    return rows
  }

  /// The server's error in `result`, or a lost connection if the connection is no longer usable
  /// (the error then is whatever libpq saw last: "server closed the connection unexpectedly").
  static func error(of result: OpaquePointer?, connection: OpaquePointer) -> PostgresError {
    if PQstatus(connection) != CONNECTION_OK {
      return .connectionLost(message: errorMessage(of: connection))
    }
    guard let result else { return .connectionLost(message: errorMessage(of: connection)) }
    let message =
      field(result, dt_pg_diag_message_primary())
      ?? String(cString: PQresultErrorMessage(result)).trimmingWhitespace
    return .server(
      sqlState: field(result, dt_pg_diag_sqlstate()) ?? "XX000", message: message,
      detail: field(result, dt_pg_diag_message_detail()))
  }

  static func errorMessage(of connection: OpaquePointer) -> String {
    PQerrorMessage(connection).map { String(cString: $0).trimmingWhitespace } ?? "unknown error"
  }

  private static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
    PQresultErrorField(result, code).map { String(cString: $0) }
  }

  private static func decode(
    _ text: UnsafeMutablePointer<CChar>, length: Int, type: UInt32, column: String
  ) throws(PostgresError) -> PostgresValue {
    let string = String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    switch type {
    case PostgresType.bool:
      if string == "t" { return .bool(true) }
      if string == "f" { return .bool(false) }
    case PostgresType.int2, PostgresType.int4, PostgresType.int8, PostgresType.oid:
      if let number = Int64(string) { return .int64(number) }
    case PostgresType.float4, PostgresType.float8:
      if let number = Double(string) { return .double(number) }
    case PostgresType.bytea:
      return .bytes(try unescapeBytea(text, column: column))
    default:
      break
    }
    return .text(string)
  }

  /// bytea's text form is `\x` + hex (or the older escape format if the server is set so);
  /// PQunescapeBytea reads both.
  private static func unescapeBytea(_ text: UnsafeMutablePointer<CChar>, column: String) throws(PostgresError)
    -> [UInt8]
  {
    var length = 0
    let escaped = UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
    guard let bytes = PQunescapeBytea(escaped, &length) else {
      throw .decoding(column: column, message: "cannot unescape bytea (out of memory)")
    }
    defer { PQfreemem(bytes) }
    return Array(UnsafeBufferPointer(start: bytes, count: length))
  }
}

extension String {
  var trimmingWhitespace: String {
    let scalars = unicodeScalars
    guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
      let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
    else { return "" }
    return String(scalars[first...last])
  }
}
