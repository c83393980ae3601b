import CPostgres

/// One statement of a pipeline: SQL with `$1, $2, ...` and the values bound to them.
public struct PostgresStatement: Sendable, Equatable {
  public let sql: String
  public let parameters: [PostgresValue]

  public init(_ sql: String, _ parameters: [PostgresValue] = []) {
    self.sql = sql
    self.parameters = parameters
  }
}

extension PostgresConnection {
  /// The most statements one `pipeline` call sends: the server's answers to them wait in the
  /// socket's buffers until every statement is sent, so a flight stays small.
  public static let maximumPipelineLength = 1024

  /// Sends `statements` in one flight (libpq's pipeline mode, one sync at the end) and returns
  /// each one's rows, in order: one round trip instead of one per statement. The server runs
  /// them in order and stops at the first that fails, skipping the rest; that error is thrown.
  /// Outside a transaction the statements form an implicit one, undone whole by an error; inside
  /// one (after BEGIN), the transaction is left aborted for the caller to roll back. A connection
  /// lost meanwhile is closed and reported as `connectionLost`.
  public func pipeline(_ statements: [PostgresStatement]) throws(PostgresError) -> [[PostgresRow]] {
    guard !statements.isEmpty else { return [] }
    guard statements.count <= Self.maximumPipelineLength else {
      throw .invalidRequest("a pipeline holds at most \(Self.maximumPipelineLength) statements")
    }
    var bound: [PostgresParameters] = []
    for statement in statements {
      guard !statement.sql.utf8.contains(0) else { throw .invalidRequest("the SQL contains a NUL byte") }
      bound.append(try PostgresParameters(statement.parameters))
    }
    return try withHandle { connection throws(PostgresError) in
      try runPipeline(statements, bound, on: connection)
    }
  }

  /// Under the connection's lock. Every way out leaves the connection either out of pipeline
  /// mode and idle between statements, or closed.
  private func runPipeline(
    _ statements: [PostgresStatement], _ bound: [PostgresParameters], on connection: OpaquePointer
  ) throws(PostgresError) -> [[PostgresRow]] {
    guard PQenterPipelineMode(connection) == 1 else { throw lost(connection) }
    // The statements this flight prepares, each read back before the statement it precedes.
    var preparing: [(position: Int, key: PreparedStatements.Key, name: String)] = []
    // A statement prepared earlier in this flight runs by that name (if its preparing failed, the
    // server skips the rest of the flight anyway).
    var preparingNames: [PreparedStatements.Key: String] = [:]
    for (position, (statement, parameters)) in zip(statements, bound).enumerated() {
      let name: String?
      switch preparedStatements.use(sql: statement.sql, types: parameters.types, preparing: preparing.count) {
      case .prepared(let known): name = known
      case .prepare(let key, let new):
        if let earlier = preparingNames[key] {
          name = earlier
        } else {
          guard PQsendPrepare(connection, new, statement.sql, parameters.count, parameters.types) == 1 else {
            throw lost(connection)
          }
          preparing.append((position, key, new))
          preparingNames[key] = new
          name = new
        }
      case .unprepared: name = nil
      }
      let sent = parameters.withValuePointers { values in
        if let name {
          PQsendQueryPrepared(connection, name, parameters.count, values, parameters.lengths, parameters.formats, 0)
        } else {
          PQsendQueryParams(
            connection, statement.sql, parameters.count, parameters.types, values, parameters.lengths,
            parameters.formats, 0)
        }
      }
      // Not sent: the connection broke (what else fails here was checked above); what was queued
      // cannot be taken back, so the connection goes.
      guard sent == 1 else { throw lost(connection) }
    }
    guard PQpipelineSync(connection) == 1 else { throw lost(connection) }
    var results: [[PostgresRow]] = []
    results.reserveCapacity(statements.count)
    var failure: PostgresError?
    var nextPrepared = preparing.startIndex
    for position in statements.indices {
      if nextPrepared < preparing.endIndex, preparing[nextPrepared].position == position {
        let prepared = preparing[nextPrepared]
        nextPrepared += 1
        guard let result = PQgetResult(connection) else { throw lost(connection) }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK {
          preparedStatements.prepared(prepared.key, as: prepared.name)
        } else if status != PGRES_PIPELINE_ABORTED {
          guard PQstatus(connection) == CONNECTION_OK else {
            PQclear(result)
            throw lost(connection)
          }
          failure = failure ?? PostgresResult.error(of: result, connection: connection)
        }
        PQclear(result)
        guard PQgetResult(connection) == nil else { throw lost(connection) }
      }
      guard let result = PQgetResult(connection) else { throw lost(connection) }
      defer { PQclear(result) }
      switch PQresultStatus(result) {
      case PGRES_TUPLES_OK:
        do throws(PostgresError) {
          results.append(try PostgresResult.rows(of: result))
        } catch {
          failure = failure ?? error
          results.append([])
        }
      case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_PIPELINE_ABORTED: results.append([])
      case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
        abandon(connection)
        throw .invalidRequest("COPY is not supported; the connection was closed")
      default:
        guard PQstatus(connection) == CONNECTION_OK else { throw lost(connection) }
        failure = failure ?? PostgresResult.error(of: result, connection: connection)
        results.append([])
      }
      // Each statement's results end with a null; anything else is a state this does not handle.
      guard PQgetResult(connection) == nil else { throw lost(connection) }
    }
    guard let sync = PQgetResult(connection) else { throw lost(connection) }
    let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
    PQclear(sync)
    guard synced, PQexitPipelineMode(connection) == 1 else { throw lost(connection) }
    if let failure { throw failure }
    return results
  }

  /// Closes the connection, which a pipeline left unusable, and says why.
  private func lost(_ connection: OpaquePointer) -> PostgresError {
    let message = PostgresResult.errorMessage(of: connection)
    abandon(connection)
    return .connectionLost(message: message.isEmpty ? "the pipeline was interrupted" : message)
  }
}
