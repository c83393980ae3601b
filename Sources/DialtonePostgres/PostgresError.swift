/// Everything that can go wrong talking to PostgreSQL. Server errors keep their SQLSTATE so that
/// callers branch on codes (a unique violation, a serialization failure), never on message text.
public enum PostgresError: Error, Sendable, Equatable, CustomStringConvertible {
  /// No connection could be established (refused, unknown host, bad credentials, timeout).
  case connectionFailed(message: String)
  /// An established connection broke (server killed, network gone, connection closed).
  case connectionLost(message: String)
  /// The server rejected a statement.
  case server(sqlState: String, message: String, detail: String?)
  /// A request the wrapper refuses before it reaches the server (a NUL byte in text, a nested
  /// transaction, an unsupported statement such as COPY).
  case invalidRequest(String)
  /// A typed accessor met a NULL-free value of another type, or a column that does not exist.
  case decoding(column: String, message: String)
  /// The pool already has as many waiting tasks as it allows.
  case poolExhausted(maxWaiters: Int)
  /// The pool was closed.
  case poolClosed
  /// The task was cancelled while it waited for a pool connection.
  case cancelled

  /// The SQLSTATE of a server error (https://www.postgresql.org/docs/15/errcodes-appendix.html).
  public var sqlState: String? {
    if case .server(let sqlState, _, _) = self { return sqlState }
    return nil
  }

  public var isUniqueViolation: Bool { sqlState == "23505" }
  public var isSyntaxError: Bool { sqlState == "42601" }
  /// A conflict the caller should retry in a new transaction (serialization failure, deadlock).
  public var isRetryableConflict: Bool { sqlState == "40001" || sqlState == "40P01" }

  /// The connection is gone: the caller must use another one (the pool discards it).
  public var isConnectionLost: Bool {
    if case .connectionLost = self { return true }
    return false
  }

  public var description: String {
    switch self {
    case .connectionFailed(let message): "postgres: cannot connect: \(message)"
    case .connectionLost(let message): "postgres: connection lost: \(message)"
    case .server(let sqlState, let message, let detail):
      "postgres error \(sqlState): \(message)" + (detail.map { " (\($0))" } ?? "")
    case .invalidRequest(let message): "postgres: invalid request: \(message)"
    case .decoding(let column, let message): "postgres: column \(column): \(message)"
    case .poolExhausted(let maxWaiters): "postgres: pool exhausted (\(maxWaiters) tasks already waiting)"
    case .poolClosed: "postgres: pool closed"
    case .cancelled: "postgres: cancelled while waiting for a connection"
    }
  }
}

// The wrapper's own transaction errors, made in one place so that the plain and the pipelined
// transaction report them alike.
extension PostgresError {
  /// BEGIN on a connection that already has a transaction open: PostgreSQL would only warn and
  /// carry on in the outer one, so the inner body's "rollback" would not undo anything.
  static let nestedTransaction = PostgresError.invalidRequest(
    "a transaction is already open on this connection (nesting is not supported)")

  /// 25P02: an earlier statement's error left the transaction aborted. `rolledBack` says whether
  /// the wrapper has already rolled it back (at commit) or the caller is still inside it.
  static func abortedTransaction(rolledBack: Bool) -> PostgresError {
    .server(
      sqlState: "25P02",
      message: "the transaction was aborted by an earlier error" + (rolledBack ? " and was rolled back" : ""),
      detail: nil)
  }
}
