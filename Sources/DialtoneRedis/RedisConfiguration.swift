/// Where and how to connect: `redis://host[:port][/db]` (a password or ACL user is not supported
/// yet and is refused rather than ignored).
public struct RedisConfiguration: Sendable, Equatable {
  public var host: String
  public var port: Int
  /// The logical database SELECTed after connecting; 0 is the server's default.
  public var database: Int
  /// Bounds the TCP connect (redisConnectWithTimeout).
  public var connectTimeout: Duration
  /// Bounds every send and every wait for a reply (redisSetTimeout): a dead or silent server
  /// becomes an error after this long, never a hang.
  public var commandTimeout: Duration

  public init(
    host: String = "127.0.0.1", port: Int = 6379, database: Int = 0, connectTimeout: Duration = .seconds(5),
    commandTimeout: Duration = .seconds(5)
  ) {
    self.host = host
    self.port = port
    self.database = database
    self.connectTimeout = connectTimeout
    self.commandTimeout = commandTimeout
  }

  public init(url: String, connectTimeout: Duration = .seconds(5), commandTimeout: Duration = .seconds(5))
    throws(RedisError)
  {
    let prefix = "redis://"
    guard url.hasPrefix(prefix) else { throw .invalidRequest("not a redis:// URL: \(url)") }
    let rest = url.dropFirst(prefix.count)
    let authority = rest.prefix { $0 != "/" }
    let path = rest.dropFirst(authority.count).dropFirst()
    guard !authority.contains("@") else { throw .invalidRequest("passwords in redis:// URLs are not supported") }
    var host = String(authority)
    var port = 6379
    if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
      guard let parsed = Int(authority[authority.index(after: colon)...]), (1...65535).contains(parsed) else {
        throw .invalidRequest("bad port in \(url)")
      }
      host = String(authority[..<colon])
      port = parsed
    }
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty else { throw .invalidRequest("no host in \(url)") }
    var database = 0
    if !path.isEmpty {
      guard let parsed = Int(path), parsed >= 0 else { throw .invalidRequest("bad database number in \(url)") }
      database = parsed
    }
    self.init(
      host: host, port: port, database: database, connectTimeout: connectTimeout, commandTimeout: commandTimeout)
  }
}
