import CPostgres

extension PostgresConnection {
  /// Runs `body` between BEGIN and COMMIT; rolls back if it throws. A body that swallowed a
  /// statement's error has left the transaction aborted: it is rolled back too, and this throws
  /// 25P02 rather than report a commit that did not happen. If the connection is lost during
  /// COMMIT, whether it committed is unknown.
  public func transaction<T>(_ body: () throws -> T) throws -> T {
    try runTransaction(body) { $0 }
  }

  /// The same with PostgresError as the only error, for this module's own use.
  func typedTransaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
    try runTransaction(body) { $0 }
  }

  private func runTransaction<T, E: Error>(_ body: () throws(E) -> T, wrap: (PostgresError) -> E) throws(E) -> T {
    do throws(PostgresError) {
      guard transactionStatus == PQTRANS_IDLE else {
        throw PostgresError.nestedTransaction
      }
      try execute("BEGIN")
    } catch {
      throw wrap(error)
    }
    let result: T
    do {
      result = try body()
    } catch {
      try? execute("ROLLBACK")
      throw error
    }
    do throws(PostgresError) {
      if transactionStatus == PQTRANS_INERROR {
        try? execute("ROLLBACK")
        throw PostgresError.abortedTransaction(rolledBack: true)
      }
      try execute("COMMIT")
    } catch {
      throw wrap(error)
    }
    return result
  }
}
