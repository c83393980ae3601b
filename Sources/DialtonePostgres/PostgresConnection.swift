import CPostgres
import DialtoneSupport
import Foundation

/// One libpq connection. Calls block the calling thread until the server answers (bounded by the
/// configuration's timeouts when the server or the network dies). Use it from one task at a
/// time: the pool hands each connection to one task, and a transaction is only one if nobody
/// else runs statements on the connection meanwhile.
public final class PostgresConnection: @unchecked Sendable {
  // @unchecked: `handle` is only read or written under `lock`, which serialises every libpq call on it.
  private let lock = Locked()
  private var handle: OpaquePointer?
  /// The statements this connection prepared (under `lock`, as `handle`).
  var preparedStatements: PreparedStatements

  /// The server process serving this connection (`pg_backend_pid()`).
  public let backendPID: Int32
  /// As PQserverVersion reports it, e.g. 150018 for 15.18.
  public let serverVersion: Int

  public convenience init(url: String, connectTimeout: Duration = .seconds(5)) throws(PostgresError) {
    try self.init(PostgresConfiguration(url: url, connectTimeout: connectTimeout))
  }

  public init(_ configuration: PostgresConfiguration) throws(PostgresError) {
    let parameters = configuration.connectionParameters
    if parameters.contains(where: { $0.value.utf8.contains(0) }) {
      throw .invalidRequest("the connection URL contains a NUL byte")
    }
    let keywords = parameters.map { strdup($0.keyword) }
    let values = parameters.map { strdup($0.value) }
    defer {
      for pointer in keywords + values { free(pointer) }
    }
    let connection = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keywordList in
      (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valueList in
        PQconnectdbParams(keywordList.baseAddress, valueList.baseAddress, 1)
      }
    }
    guard let connection else { throw .connectionFailed(message: "libpq could not allocate a connection") }
    guard PQstatus(connection) == CONNECTION_OK else {
      let message = PostgresResult.errorMessage(of: connection)
      PQfinish(connection)
      throw .connectionFailed(message: message)
    }
    dt_pg_silence_notices(connection)
    handle = connection
    preparedStatements = PreparedStatements(limit: configuration.preparedStatements)
    backendPID = PQbackendPID(connection)
    serverVersion = Int(PQserverVersion(connection))
  }

  deinit { PQfinish(handle) }

  /// Runs one statement with `$1, $2, ...` bound to `parameters` (PQexecParams: values never
  /// become SQL text). Returns its rows; none for a command. Prepared the first time it runs
  /// (one more round trip then) and run by name after, as a pipeline's statements are.
  @discardableResult
  public func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> [PostgresRow] {
    guard !sql.utf8.contains(0) else { throw .invalidRequest("the SQL contains a NUL byte") }
    let bound = try PostgresParameters(parameters)
    return try withHandle { connection throws(PostgresError) in
      let name: String
      switch preparedStatements.use(sql: sql, types: bound.types) {
      case .prepared(let known): name = known
      case .prepare(let key, let new):
        // What fails to prepare fails as the statement would have: the same error, no rows.
        _ = try finish(PQprepare(connection, new, sql, bound.count, bound.types), connection)
        preparedStatements.prepared(key, as: new)
        name = new
      case .unprepared:
        let result = bound.withValuePointers { values in
          PQexecParams(connection, sql, bound.count, bound.types, values, bound.lengths, bound.formats, 0)
        }
        return try finish(result, connection)
      }
      let result = bound.withValuePointers { values in
        PQexecPrepared(connection, name, bound.count, values, bound.lengths, bound.formats, 0)
      }
      return try finish(result, connection)
    }
  }

  /// Runs parameterless SQL, which may hold several statements (a migration's DDL).
  public func execute(_ sql: String) throws(PostgresError) {
    guard !sql.utf8.contains(0) else { throw .invalidRequest("the SQL contains a NUL byte") }
    try withHandle { connection throws(PostgresError) in
      _ = try finish(PQexec(connection, sql), connection)
    }
  }

  /// Whether the connection still works, as far as can be told without a round trip: reads what
  /// the server sent meanwhile, so a server that died since the last statement shows here.
  public var isAlive: Bool {
    return lock.withLock {
      guard let handle else { return false }
      // Twice: a server that went away (a restart) sends its FATAL notice and then closes; one read
      // takes the notice and only the next sees the end of the stream.
      return PQconsumeInput(handle) == 1 && PQconsumeInput(handle) == 1 && PQstatus(handle) == CONNECTION_OK
    }
  }

  /// Alive and outside any transaction: what the pool may hand to its next user.
  var isReusable: Bool {
    return lock.withLock {
      guard let handle else { return false }
      return PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }
  }

  /// libpq's view of the transaction (PQtransactionStatus), for the transaction helper.
  var transactionStatus: PGTransactionStatusType {
    return lock.withLock {
      guard let handle else { return PQTRANS_UNKNOWN }
      return PQtransactionStatus(handle)
    }
  }

  /// How many statements this connection has prepared (`PostgresConfiguration.preparedStatements`).
  public var preparedStatementCount: Int { lock.withLock { preparedStatements.count } }

  /// Closes the connection; later calls fail with `connectionLost`.
  public func close() {
    lock.withLock {
      PQfinish(handle)
      handle = nil
    }
  }

  func withHandle<R>(_ body: (OpaquePointer) throws(PostgresError) -> R) throws(PostgresError) -> R {
    return try lock.withLock { () throws(PostgresError) in
      guard let handle else { throw .connectionLost(message: "the connection is closed") }
      return try body(handle)
    }
  }

  /// Closes the connection from inside `withHandle` (the lock held): a pipeline that left
  /// libpq in a state this wrapper cannot continue from.
  func abandon(_ connection: OpaquePointer) {
    PQfinish(connection)
    handle = nil
  }

  /// Turns a PGresult into rows or an error, and frees it. Called under `lock`.
  private func finish(_ result: OpaquePointer?, _ connection: OpaquePointer) throws(PostgresError) -> [PostgresRow] {
    defer { PQclear(result) }
    guard let result else { throw PostgresResult.error(of: nil, connection: connection) }
    switch PQresultStatus(result) {
    case PGRES_TUPLES_OK: return try PostgresResult.rows(of: result)
    case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY: return []
    case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
      // The connection is now in COPY mode, which this wrapper does not speak: nothing else
      // can run on it, so it is closed (the pool replaces it).
      PQfinish(connection)
      handle = nil
      throw .invalidRequest("COPY is not supported; the connection was closed")
    default: throw PostgresResult.error(of: result, connection: connection)
    }
  }
}
