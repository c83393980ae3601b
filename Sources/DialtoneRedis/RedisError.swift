/// Everything that can go wrong talking to Redis. Server errors keep their code (WRONGTYPE,
/// NOSCRIPT...) so that callers branch on it, never on message text.
public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
  /// No connection could be established (refused, unknown host, connect timeout, SELECT refused).
  case connectionFailed(message: String)
  /// An established connection broke (server killed, connection reset, closed by `close()`).
  case connectionLost(message: String)
  /// No reply within the command timeout. The connection is closed: a late reply would otherwise
  /// answer the next command.
  case timeout(message: String)
  /// The server answered with an error reply.
  case server(prefix: String, message: String)
  /// hiredis could not parse what the server sent; the connection is closed.
  case protocolError(message: String)
  /// A reply of another shape than the command returns (a convenience method's check).
  case unexpectedReply(RedisReply)
  /// A subscriber's consumer fell `limit` messages behind: the stream ends with this error rather
  /// than lose messages silently, so that the consumer knows to resynchronise.
  case subscriberOverflow(limit: Int)
  /// A request the wrapper refuses before it reaches the server (a bad URL, no arguments).
  case invalidRequest(String)

  /// The code of a server error reply, e.g. "WRONGTYPE".
  public var serverPrefix: String? {
    if case .server(let prefix, _) = self { return prefix }
    return nil
  }

  /// The connection is unusable: the caller must open another one.
  public var isConnectionLost: Bool {
    switch self {
    case .connectionLost, .timeout, .protocolError: true
    default: false
    }
  }

  public var description: String {
    switch self {
    case .connectionFailed(let message): "redis: cannot connect: \(message)"
    case .connectionLost(let message): "redis: connection lost: \(message)"
    case .timeout(let message): "redis: timeout: \(message)"
    case .server(let prefix, let message): "redis error \(prefix): \(message)"
    case .protocolError(let message): "redis: protocol error: \(message)"
    case .unexpectedReply(let reply): "redis: unexpected reply \(reply)"
    case .subscriberOverflow(let limit): "redis: subscriber fell \(limit) messages behind"
    case .invalidRequest(let message): "redis: invalid request: \(message)"
    }
  }
}
