import DialtoneTLS
import Foundation

/// Where and how to connect: `redis://[[user]:password@]host[:port][/db]`, the user and password
/// percent-encoded as in any URL (an ACL user and its password, or only a password for a server
/// with `requirepass`). `rediss://` is the same over TLS, the server's certificate checked against
/// the CA of `?ca-file=` (else the system's) and the host name (or `server-name=`), with a client
/// certificate from `cert-file=` and `key-file=`.
///
/// A Redis Cluster: `redis-cluster://host:port,host:port` (`rediss-cluster://` over TLS), or a
/// `redis://`/`rediss://` URL listing more than one `host:port`. The addresses are seeds: any
/// one that answers gives the slot map (`RedisClusterConnection`). No database number there: a
/// cluster has only database 0.
///
/// `?wait-replicas=N` (default 1; 0: no WAIT) and `?wait-timeout-ms=MS` (default 500) set how
/// many replicas must confirm each write before it counts as stored (`RedisReplicaWait`), on one
/// server as on each shard of a cluster; a server or shard without replicas is never waited on.
public struct RedisConfiguration: Sendable, Equatable {
  public var host: String
  public var port: Int
  /// Nil: one server (`host`, `port`). Otherwise a Redis Cluster, found from these seeds (the
  /// first is `host`, `port`).
  public var clusterSeeds: [RedisAddress]?
  /// The ACL user to authenticate as (`AUTH user password`); nil with a password: `default`.
  public var username: String?
  /// Sent with `AUTH` right after connecting, before anything else; never logged.
  public var password: String?
  /// TLS (`rediss://`); nil: plain TCP.
  public var tls: TLSClientSettings?
  /// The logical database SELECTed after connecting; 0 is the server's default.
  public var database: Int
  /// Bounds the TCP connect (redisConnectWithTimeout).
  public var connectTimeout: Duration
  /// Bounds every send and every wait for a reply (redisSetTimeout): a dead or silent server
  /// becomes an error after this long, never a hang.
  public var commandTimeout: Duration
  /// How many replicas confirm a write before it counts as stored (capped at those the server,
  /// or the cluster's shard, has).
  public var replicaWait: RedisReplicaWait = .standard

  public init(
    host: String = "127.0.0.1", port: Int = 6379, username: String? = nil, password: String? = nil,
    tls: TLSClientSettings? = nil, database: Int = 0, connectTimeout: Duration = .seconds(5),
    commandTimeout: Duration = .seconds(5)
  ) {
    self.tls = tls
    self.host = host
    self.port = port
    self.username = username
    self.password = password
    self.database = database
    self.connectTimeout = connectTimeout
    self.commandTimeout = commandTimeout
  }

  /// The same settings for a Redis Cluster found from `seeds` (at least one).
  public static func cluster(
    seeds: [RedisAddress], username: String? = nil, password: String? = nil, tls: TLSClientSettings? = nil,
    connectTimeout: Duration = .seconds(5), commandTimeout: Duration = .seconds(5)
  ) -> RedisConfiguration {
    let first = seeds.first ?? RedisAddress(host: "127.0.0.1", port: 6379)
    var configuration = RedisConfiguration(
      host: first.host, port: first.port, username: username, password: password, tls: tls,
      connectTimeout: connectTimeout, commandTimeout: commandTimeout)
    configuration.clusterSeeds = seeds.isEmpty ? [first] : seeds
    return configuration
  }

  /// These settings for one server of a cluster (a node the slot map names).
  public func node(_ address: RedisAddress) -> RedisConfiguration {
    var single = self
    single.host = address.host
    single.port = address.port
    single.clusterSeeds = nil
    return single
  }

  /// Opens what the configuration names: one connection, or a cluster connection.
  public func open() throws(RedisError) -> any RedisClient {
    if clusterSeeds != nil { return try RedisClusterConnection(self) }
    return try RedisConnection(self)
  }

  public init(url: String, connectTimeout: Duration = .seconds(5), commandTimeout: Duration = .seconds(5))
    throws(RedisError)
  {
    let shown = Self.redacted(url)
    let schemes = [
      "redis://": (false, false), "rediss://": (true, false), "redis-cluster://": (false, true),
      "rediss-cluster://": (true, true),
    ]
    guard let (scheme, (secure, clusterScheme)) = schemes.first(where: { url.hasPrefix($0.key) }) else {
      throw .invalidRequest("not a redis://, rediss://, redis-cluster:// or rediss-cluster:// URL: \(shown)")
    }
    let rest = url.dropFirst(scheme.count)
    var authority = rest.prefix { $0 != "/" && $0 != "?" }
    let afterAuthority = rest.dropFirst(authority.count)
    let path = afterAuthority.prefix { $0 != "?" }.drop { $0 == "/" }
    let query = afterAuthority.drop { $0 != "?" }.dropFirst()
    var tls: TLSClientSettings? = secure ? TLSClientSettings() : nil
    var replicaWait = RedisReplicaWait.standard
    let known = "ca-file, cert-file, key-file, server-name (rediss://), wait-replicas, wait-timeout-ms"
    for item in query.split(separator: "&") {
      let parts = item.split(separator: "=", maxSplits: 1)
      guard parts.count == 2, let value = String(parts[1]).removingPercentEncoding, !value.isEmpty else {
        throw .invalidRequest("unknown parameter \(parts.first ?? "") in \(shown) (known: \(known))")
      }
      switch parts[0] {
      case "wait-replicas":
        guard let count = Int(value), (0...16).contains(count) else {
          throw .invalidRequest("wait-replicas must be a number of replicas from 0 to 16 in \(shown)")
        }
        replicaWait.replicas = count
      case "wait-timeout-ms":
        guard let milliseconds = Int64(value), (1...60_000).contains(milliseconds) else {
          throw .invalidRequest("wait-timeout-ms must be from 1 to 60000 in \(shown)")
        }
        replicaWait.timeout = .milliseconds(milliseconds)
      case "ca-file" where secure: tls?.caFile = value
      case "cert-file" where secure: tls?.certificateFile = value
      case "key-file" where secure: tls?.keyFile = value
      case "server-name" where secure: tls?.serverName = value
      default:
        throw .invalidRequest("unknown parameter \(parts[0]) in \(shown) (known: \(known))")
      }
    }
    if (tls?.certificateFile == nil) != (tls?.keyFile == nil) {
      throw .invalidRequest("cert-file and key-file go together in \(shown)")
    }
    var username: String?
    var password: String?
    if let at = authority.lastIndex(of: "@") {
      let userinfo = authority[..<at]
      authority = authority[authority.index(after: at)...]
      let user = userinfo.prefix { $0 != ":" }
      guard user.count < userinfo.count else {
        throw .invalidRequest("a redis:// URL's credentials are user:password or :password: \(shown)")
      }
      guard let decodedUser = String(user).removingPercentEncoding,
        let decodedPassword = String(userinfo.dropFirst(user.count + 1)).removingPercentEncoding
      else { throw .invalidRequest("bad percent-encoding in the credentials of \(shown)") }
      username = decodedUser.isEmpty ? nil : decodedUser
      password = decodedPassword
    }
    var addresses: [RedisAddress] = []
    for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
      addresses.append(try Self.address(part, shown))
    }
    var database = 0
    if !path.isEmpty {
      guard let parsed = Int(path), parsed >= 0 else { throw .invalidRequest("bad database number in \(shown)") }
      database = parsed
    }
    let first = addresses[0]
    self.init(
      host: first.host, port: first.port, username: username, password: password, tls: tls, database: database,
      connectTimeout: connectTimeout, commandTimeout: commandTimeout)
    if clusterScheme || addresses.count > 1 {
      guard database == 0 else { throw .invalidRequest("a Redis Cluster has only database 0: \(shown)") }
      clusterSeeds = addresses
    }
    self.replicaWait = replicaWait
  }

  private static func address(_ authority: Substring, _ shown: String) throws(RedisError) -> RedisAddress {
    var host = String(authority)
    var port = 6379
    if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
      guard let parsed = Int(authority[authority.index(after: colon)...]), (1...65535).contains(parsed) else {
        throw .invalidRequest("bad port in \(shown)")
      }
      host = String(authority[..<colon])
      port = parsed
    }
    if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty else { throw .invalidRequest("no host in \(shown)") }
    return RedisAddress(host: host, port: port)
  }

  /// The URL as logs and errors may show it: a password replaced by `***`.
  public static func redacted(_ url: String) -> String {
    let scheme = url.range(of: "://").map { url[..<$0.upperBound] } ?? ""
    let rest = url.dropFirst(scheme.count)
    let authority = rest.prefix { $0 != "/" }
    guard let at = authority.lastIndex(of: "@") else { return url }
    let user = authority[..<at].prefix { $0 != ":" }
    return scheme + user + ":***" + rest[at...]
  }
}

extension RedisConfiguration: CustomStringConvertible {
  /// Never the password: a configuration printed into a log or an error stays safe to share.
  public var description: String {
    let credentials = password == nil ? "" : "\(username ?? ""):***@"
    guard let clusterSeeds else {
      return "\(tls == nil ? "redis" : "rediss")://\(credentials)\(RedisAddress(host: host, port: port))/\(database)"
    }
    let seeds = clusterSeeds.map(\.description).joined(separator: ",")
    return "\(tls == nil ? "redis" : "rediss")-cluster://\(credentials)\(seeds)"
  }
}

/// A server's address: a cluster's seed, or a node its slot map names.
public struct RedisAddress: Sendable, Hashable, CustomStringConvertible {
  public var host: String
  public var port: Int

  public init(host: String, port: Int) {
    self.host = host
    self.port = port
  }

  public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
