/// Where and how to connect. The URL is libpq's (`postgres://user:pass@host:port/db?sslmode=...`,
/// https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING).
public struct PostgresConfiguration: Sendable {
  public var url: String
  /// libpq's `connect_timeout`, per host address tried, in whole seconds (libpq's minimum is 2).
  /// It overrides one given in the URL.
  public var connectTimeout: Duration
  /// How long sent data may stay unacknowledged before the connection counts as lost
  /// (`tcp_user_timeout`). With TCP keepalives it bounds waits on a host that vanished without a
  /// reset; a killed server process resets the connection at once. The URL may override it.
  public var tcpUserTimeout: Duration
  /// How many distinct statements (SQL and parameter types) a connection prepares, each once, to
  /// run by name after: the server then parses and plans them once per connection,
  /// not per run (about a third of the backend's CPU for the journal's transactions, measured in
  /// docs/benchmarks.md). 0 prepares nothing, for a pooler that cannot keep named statements
  /// across transactions (PgBouncer before 1.21, or without `max_prepared_statements`).
  public var preparedStatements: Int

  public init(
    url: String, connectTimeout: Duration = .seconds(5), tcpUserTimeout: Duration = .seconds(15),
    preparedStatements: Int = 256
  ) {
    self.url = url
    self.connectTimeout = connectTimeout
    self.tcpUserTimeout = tcpUserTimeout
    self.preparedStatements = max(0, preparedStatements)
  }

  /// PQconnectdbParams's keyword/value pairs, in order: a later keyword overrides an earlier one,
  /// including those the URL (expanded in place of `dbname`) sets.
  var connectionParameters: [(keyword: String, value: String)] {
    let seconds = max(2, connectTimeout.components.seconds + (connectTimeout.components.attoseconds > 0 ? 1 : 0))
    let milliseconds =
      tcpUserTimeout.components.seconds * 1000 + tcpUserTimeout.components.attoseconds / 1_000_000_000_000_000
    return [
      ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
      ("tcp_user_timeout", String(max(1, milliseconds))),
      ("dbname", url),
      ("connect_timeout", String(seconds)),
      // Text results are decoded as UTF-8.
      ("client_encoding", "UTF8"),
    ]
  }
}
