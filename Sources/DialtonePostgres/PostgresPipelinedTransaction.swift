import CPostgres

/// A transaction whose statements reach the server in flights (`PostgresConnection.pipeline`)
/// rather than one round trip each: statements are queued with `append`, and `flush` sends what
/// is queued, BEGIN first in the first flight; the COMMIT travels with the last. For writes that
/// need no answer before the next statement is known (a journal's batch). Not Sendable: it lives
/// inside one `pipelinedTransaction` call.
public final class PostgresPipelinedTransaction {
  private let connection: PostgresConnection
  private var pending: [PostgresStatement] = []
  private var begun = false
  /// A flight failed: the transaction is aborted and must not be committed.
  private var failed = false

  init(_ connection: PostgresConnection) {
    self.connection = connection
  }

  /// Queues a statement for the next flight; returns its position in that flight's results.
  @discardableResult
  public func append(_ sql: String, _ parameters: [PostgresValue] = []) -> Int {
    pending.append(PostgresStatement(sql, parameters))
    return pending.count - 1
  }

  /// Sends what is queued (and BEGIN, if not sent yet) and returns each queued statement's rows.
  public func flush() throws(PostgresError) -> [[PostgresRow]] {
    try send(pending)
  }

  /// Sends what is queued, then hands over the connection for statements whose answers decide
  /// what comes next; they run inside the transaction.
  public func flushed() throws(PostgresError) -> PostgresConnection {
    _ = try flush()
    return connection
  }

  /// The last flight: what is queued, then COMMIT.
  func commit() throws(PostgresError) {
    guard !failed else {
      throw .abortedTransaction(rolledBack: true)
    }
    _ = try send(pending + [PostgresStatement("COMMIT")])
  }

  private func send(_ statements: [PostgresStatement]) throws(PostgresError) -> [[PostgresRow]] {
    pending = []
    guard !failed else {
      throw .abortedTransaction(rolledBack: false)
    }
    var flight = statements
    var skipped = 0
    if !begun {
      flight.insert(PostgresStatement("BEGIN"), at: 0)
      skipped = 1
      begun = true
    }
    var results: [[PostgresRow]] = []
    do throws(PostgresError) {
      var start = 0
      while start < flight.count {
        let end = min(start + PostgresConnection.maximumPipelineLength, flight.count)
        results += try connection.pipeline(Array(flight[start..<end]))
        start = end
      }
    } catch {
      failed = true
      throw error
    }
    return Array(results.dropFirst(skipped))
  }
}

extension PostgresConnection {
  /// Runs `body` in a transaction whose statements travel in flights (see
  /// `PostgresPipelinedTransaction`), committed in the last flight; rolled back if anything
  /// throws, or if a flight failed even though `body` swallowed its error (which then throws
  /// 25P02). A transaction of statements that need no answers is one round trip. If the
  /// connection is lost during the last flight, whether it committed is unknown.
  @discardableResult
  public func pipelinedTransaction<T>(_ body: (PostgresPipelinedTransaction) throws -> T) throws -> T {
    guard transactionStatus == PQTRANS_IDLE else {
      throw PostgresError.nestedTransaction
    }
    let transaction = PostgresPipelinedTransaction(self)
    do {
      let result = try body(transaction)
      try transaction.commit()
      return result
    } catch {
      // Left open (a failed flight, a body that threw): undone here, so the connection is idle.
      if transactionStatus != PQTRANS_IDLE { try? execute("ROLLBACK") }
      throw error
    }
  }
}
