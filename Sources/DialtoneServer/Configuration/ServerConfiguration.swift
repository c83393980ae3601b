import DialtoneCalls
import DialtoneCommandLine
import DialtoneProtocol
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Everything `dialtone-server` can be told, from flags or `DIALTONE_*` environment variables
/// (flags win). Defaults make `dialtone-server` with no arguments a working local server.
public struct ServerConfiguration: Sendable, Equatable {
  public var host = "127.0.0.1"
  public var port = 8080
  public var dataDirectory = "./data"
  /// A PostgreSQL database (postgres:// or postgresql:// URL) for the history, devices, blocks,
  /// directories and live calls instead of SQLite in the data directory. Nil: SQLite.
  public var databaseURL: String?
  /// How many statements each PostgreSQL connection prepares (parsed and planned once); 0 for a
  /// pooler that cannot keep named prepared statements.
  public var databasePreparedStatements = 256
  /// A Redis (redis://host:port/db) that makes this server one node of a cluster with the others
  /// using it and the same `databaseURL`. Nil: a single server.
  public var redisURL: String?
  /// The node's name in the cluster (its log lines and its keys; a random suffix is added per
  /// start). Nil: the host name.
  public var nodeName: String?
  /// `--cluster-sessions write-behind`: the node numbers the sessions it holds and stores them
  /// in batches (incomplete, for measurement: docs/deploy.md). False: store-first.
  public var writeBehindSessions = false
  /// How long (ms) write-behind holds frames that may wait for a fuller batch.
  public var batchWindowMilliseconds = 0
  /// `--write-behind-log-stripes`: write-behind stores batches in the node's own log of this
  /// many stripes (every node the same; incomplete: a resume does not read it yet). 0: in each
  /// session's keys.
  public var writeBehindLogStripes = 0
  /// How long a node counts as alive after its last heartbeat (`--node-expiry`); nil: 3 s.
  public var nodeExpirySeconds: Double?
  /// HS256 secret shared with the app's backend. Nil: read or generate `<data-dir>/auth-secret`.
  public var authSecret: String?
  public var logLevel: LogLevel = .info
  public var logFormat: LogFormat = .text
  /// The credential of `/admin` (Bearer, or the password of Basic). Nil: the dashboard is off.
  public var adminToken: String?
  /// The app backend's credential for `PUT /v1/directory/{userId}`. Nil: uploads are off.
  public var directoryToken: String?
  /// Whether blockers see, in their own history, the calls their blocks silenced.
  public var blockedCallsInHistory = BlockedCallsInHistory.hide
  /// Where `/metrics` is served instead of the public port (e.g. 127.0.0.1:9100). Nil: on the public port.
  public var metricsHost: String?
  /// A directory whose softphone.html / admin.html replace the built-in pages (re-read per request).
  public var webRoot: String?
  public var metricsPort: Int?
  /// PEM certificate chain and key: the server speaks `https://` and `wss://` on its port.
  public var tlsCertificateFile: String?
  public var tlsKeyFile: String?

  // Signaling timings (seconds).
  public var helloTimeout: Double = 5
  public var ringTimeout: Double = 45
  public var reconnectGrace: Double = 30
  public var resumeWindow: Double = 60
  public var heartbeatSeconds = 25
  public var drainSeconds: Double = 5
  /// How long the `ack` of a trickled candidate may wait to share a write with the next message
  /// to the same socket (usually the peer's next candidate); 0 acks at once.
  public var ackDelay: Double = 0.04

  // ICE servers handed to clients.
  public var turnSecret: String?
  public var turnURLs: [String] = []
  public var stunURLs: [String] = []
  public var turnTTL = 43_200

  // Push.
  public var apnsKeyFile: String?
  public var apnsKeyID: String?
  public var apnsTeamID: String?
  /// Overrides the APNs base URL for both environments (a mock in tests).
  public var apnsURL: String?
  public var fcmServiceAccountFile: String?
  /// Overrides FCM's base URL (a mock in tests).
  public var fcmURL: String?
  /// A PEM bundle trusted for push connections instead of the system's (self-signed mocks).
  public var pushCAFile: String?
  /// First retry delay for failed pushes (doubles up to 4 s); not a flag: tests shorten it.
  public var pushRetryFirstDelay: Double = 0.5

  // Group calls: one SFU, Janus (proxied) or LiveKit (direct).
  /// Janus's HTTP API, e.g. http://127.0.0.1:8088/janus.
  public var janusURL: String?
  public var janusAPISecret: String?
  public var janusAdminKey: String?
  /// LiveKit's URL as clients reach it, e.g. wss://livekit.example.com.
  public var liveKitURL: String?
  public var liveKitAPIKey: String?
  public var liveKitAPISecret: String?
  /// Most members a group call rings (the creator not counted).
  public var groupRingLimit = 16
  /// Who may ring more people into a running group call.
  public var groupInvitePolicy = GroupInvitePolicy.members

  /// What one socket, user or address may make the server hold or do.
  public var limits = ServerLimits()
  /// Plain relayed candidates take the hub's fast lane (`RequestPipeline`). Not a setting of
  /// the server's: tests turn it off to compare the fast lane's output with the general path's.
  var relayFastLane = true

  public init() {}
}

public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
  public let description: String
  init(_ description: String) { self.description = description }
}

extension ServerConfiguration {
  /// One row per option: the flag, its environment variable, and how it applies.
  private struct Option: Sendable {
    let flag: String
    let help: String
    let repeatable: Bool
    let apply: @Sendable (inout ServerConfiguration, String) throws(ConfigurationError) -> Void
  }

  private static func number<T: LosslessStringConvertible>(_ value: String, _ flag: String) throws(ConfigurationError)
    -> T
  {
    guard let parsed = T(value) else { throw ConfigurationError("--\(flag) expects a number, got \"\(value)\"") }
    return parsed
  }

  private static let options: [Option] = [
    Option(flag: "host", help: "address to listen on (default 127.0.0.1)", repeatable: false) { c, v in c.host = v },
    Option(flag: "port", help: "port to listen on (default 8080; 0 picks a free one)", repeatable: false) {
      c, v throws(ConfigurationError) in
      let port: Int = try number(v, "port")
      guard (0...65535).contains(port) else { throw ConfigurationError("--port must be 0...65535") }
      c.port = port
    },
    Option(
      flag: "data-dir", help: "directory for the database and generated secrets (default ./data)", repeatable: false
    ) { c, v in c.dataDirectory = v },
    Option(
      flag: "database-url",
      help: "PostgreSQL database instead of SQLite in the data dir (postgres://user:password@host:port/db)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard ["postgres://", "postgresql://"].contains(where: { v.lowercased().hasPrefix($0) }) else {
        throw ConfigurationError("--database-url must be a postgres:// or postgresql:// URL")
      }
      c.databaseURL = v
    },
    whole(
      "database-prepared-statements",
      "statements each PostgreSQL connection prepares, parsed and planned once (default 256; 0 behind a pooler that cannot keep named prepared statements, such as PgBouncer before 1.21 in transaction mode)",
      \.databasePreparedStatements, in: 0...4096),
    Option(
      flag: "redis-url",
      help:
        "run as one node of a cluster sharing this Redis and --database-url (redis://[user:password@]host:port/db; rediss://...?ca-file=PATH for TLS; a Redis Cluster: redis-cluster://host:port,host:port or several host:port in a redis:// URL; on either, ?wait-replicas=N&wait-timeout-ms=MS: replicas that confirm each write, default 1 and 500 ms, capped at those the primary or shard has, 0 none)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard
        ["redis://", "rediss://", "redis-cluster://", "rediss-cluster://"].contains(where: {
          v.lowercased().hasPrefix($0)
        })
      else {
        throw ConfigurationError(
          "--redis-url must be a redis://, rediss://, redis-cluster:// or rediss-cluster:// URL")
      }
      c.redisURL = v
    },
    Option(
      flag: "node-name", help: "this node's name in the cluster's logs and keys (default: the host name)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard !v.isEmpty, v.utf8.count <= 64, v.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
        throw ConfigurationError("--node-name must be 1-64 letters, digits, '-', '_' or '.'")
      }
      c.nodeName = v
    },
    Option(
      flag: "cluster-sessions",
      help:
        "how a cluster stores the sessions a node holds: store-first (default: Redis numbers and stores every message before it is written) or write-behind (INCOMPLETE, for measurement: the node numbers its sessions, writes a relayed candidate at once and stores it after, stores the rest in batches before writing it; every node must run the same mode; one Redis only; see docs/deploy.md for the guarantees it does not keep yet)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      switch v {
      case "store-first": c.writeBehindSessions = false
      case "write-behind": c.writeBehindSessions = true
      default: throw ConfigurationError("--cluster-sessions must be store-first or write-behind")
      }
    },
    whole(
      "batch-window-ms",
      "with --cluster-sessions write-behind: milliseconds relayed candidates and their acks wait for a fuller batch to Redis (default 0; at most 40, the time an ack may wait)",
      \.batchWindowMilliseconds, in: 0...40),
    Option(
      flag: "write-behind-log-stripes",
      help:
        "with --cluster-sessions write-behind: store batches in the node's own log of this many stripes (1 to 1024, every node the same) instead of each session's keys (default 0: off; INCOMPLETE: a resume reads it, but a session Redis numbers past a full inbox does not fence it yet; see docs/deploy.md)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard let stripes = Int(v), (0...1024).contains(stripes) else {
        throw ConfigurationError("--write-behind-log-stripes must be 0 to 1024")
      }
      c.writeBehindLogStripes = stripes
    },
    Option(
      flag: "node-expiry",
      help:
        "seconds a node counts as alive after its last heartbeat, before others take its calls over (default 3; on a Redis Cluster above its failover time: 2 x cluster-node-timeout + 1 s)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard let seconds = Double(v), seconds >= 2, seconds <= 600 else {
        throw ConfigurationError("--node-expiry must be a number of seconds from 2 to 600")
      }
      c.nodeExpirySeconds = seconds
    },
    Option(
      flag: "auth-secret",
      help: "HS256 secret for client tokens, at least 16 bytes (default: generated into the data dir)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard v.utf8.count >= 16 else { throw ConfigurationError("--auth-secret must be at least 16 bytes") }
      c.authSecret = v
    },
    choice("log-level", "debug | info | warning | error (default info)", \.logLevel),
    choice("log-format", "text | json (one JSON object per line; default text)", \.logFormat),
    secret(
      "admin-token",
      "credential of the /admin dashboard, at least 16 bytes (Bearer, or Basic's password); no default: off",
      \.adminToken),
    secret(
      "directory-token",
      "the app backend's credential for PUT /v1/directory/{userId}, at least 16 bytes; no default: off",
      \.directoryToken),
    choice(
      "blocked-calls-in-history",
      "hide | show: whether a blocker's history lists the calls their blocks silenced (default hide)",
      \.blockedCallsInHistory),
    Option(
      flag: "metrics-listen",
      help: "HOST:PORT to serve /metrics on instead of the public port (e.g. 127.0.0.1:9100)", repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard let colon = v.lastIndex(of: ":"), let port = Int(v[v.index(after: colon)...]), (0...65535).contains(port)
      else { throw ConfigurationError("--metrics-listen expects HOST:PORT, got \"\(v)\"") }
      let host = String(v[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
      guard !host.isEmpty else { throw ConfigurationError("--metrics-listen expects HOST:PORT, got \"\(v)\"") }
      c.metricsHost = host
      c.metricsPort = port
    },
    Option(
      flag: "web-root",
      help: "directory whose softphone.html and admin.html replace the built-in pages (read on every request)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      var isDirectory: ObjCBool = false
      guard FileManager.default.fileExists(atPath: v, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw ConfigurationError("--web-root \"\(v)\" is not a directory")
      }
      c.webRoot = v
    },
    Option(
      flag: "tls-cert", help: "PEM certificate chain: serve https:// and wss:// (with --tls-key)", repeatable: false
    ) { c, v in c.tlsCertificateFile = v },
    Option(flag: "tls-key", help: "PEM private key of --tls-cert", repeatable: false) { c, v in c.tlsKeyFile = v },
    Option(flag: "ring-timeout", help: "seconds a call rings before it is missed (default 45)", repeatable: false) {
      c, v throws(ConfigurationError) in c.ringTimeout = try number(v, "ring-timeout")
    },
    Option(
      flag: "reconnect-grace", help: "seconds a dropped participant has to come back (default 30)", repeatable: false
    ) { c, v throws(ConfigurationError) in c.reconnectGrace = try number(v, "reconnect-grace") },
    Option(
      flag: "ack-delay-ms",
      help: "longest wait for a candidate's ack to share a write with the next message (default 40; 0 = at once)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      let ms: Int = try number(v, "ack-delay-ms")
      guard (0...1000).contains(ms) else { throw ConfigurationError("--ack-delay-ms must be 0...1000") }
      c.ackDelay = Double(ms) / 1000
    },
    Option(flag: "turn-secret", help: "coturn static-auth-secret for TURN REST credentials", repeatable: false) {
      c, v in c.turnSecret = v
    },
    Option(
      flag: "turn-url", help: "TURN URL handed to clients (repeatable), e.g. turn:turn.example.com:3478?transport=udp",
      repeatable: true
    ) { c, v in c.turnURLs.append(v) },
    Option(flag: "stun-url", help: "STUN URL handed to clients (repeatable)", repeatable: true) { c, v in
      c.stunURLs.append(v)
    },
    Option(flag: "turn-ttl", help: "lifetime of TURN credentials in seconds (default 43200)", repeatable: false) {
      c, v throws(ConfigurationError) in
      let ttl: Int = try number(v, "turn-ttl")
      guard ttl >= 60 else { throw ConfigurationError("--turn-ttl must be at least 60 seconds") }
      c.turnTTL = ttl
    },
    Option(flag: "apns-key-file", help: "APNs auth key (.p8) for VoIP and alert pushes", repeatable: false) { c, v in
      c.apnsKeyFile = v
    },
    Option(flag: "apns-key-id", help: "the .p8 key's id (10 characters)", repeatable: false) { c, v in c.apnsKeyID = v
    },
    Option(flag: "apns-team-id", help: "your Apple developer team id", repeatable: false) { c, v in c.apnsTeamID = v },
    Option(
      flag: "apns-url", help: "APNs base URL (default: Apple's production/sandbox hosts per device)", repeatable: false
    ) { c, v in c.apnsURL = v },
    Option(flag: "fcm-service-account", help: "Firebase service-account JSON file for FCM HTTP v1", repeatable: false) {
      c, v in c.fcmServiceAccountFile = v
    },
    Option(flag: "fcm-url", help: "FCM base URL (default https://fcm.googleapis.com)", repeatable: false) { c, v in
      c.fcmURL = v
    },
    Option(
      flag: "push-ca-file", help: "PEM CA bundle for push connections (for self-signed test servers)", repeatable: false
    ) { c, v in c.pushCAFile = v },
    Option(
      flag: "janus-url", help: "Janus HTTP API for group calls, on loopback (e.g. http://127.0.0.1:8088/janus)",
      repeatable: false
    ) { c, v throws(ConfigurationError) in
      guard v.hasPrefix("http://") || v.hasPrefix("https://") else {
        throw ConfigurationError("--janus-url expects an http(s) URL like http://127.0.0.1:8088/janus")
      }
      c.janusURL = v
    },
    Option(flag: "janus-api-secret", help: "Janus's api_secret, if it has one", repeatable: false) { c, v in
      c.janusAPISecret = v
    },
    Option(flag: "janus-admin-key", help: "the VideoRoom plugin's admin_key, if it has one", repeatable: false) {
      c, v in c.janusAdminKey = v
    },
    Option(flag: "livekit-url", help: "LiveKit URL clients connect to for group calls (wss://...)", repeatable: false) {
      c, v in c.liveKitURL = v
    },
    Option(flag: "livekit-api-key", help: "LiveKit API key", repeatable: false) { c, v in c.liveKitAPIKey = v },
    Option(flag: "livekit-api-secret", help: "LiveKit API secret", repeatable: false) { c, v in
      c.liveKitAPISecret = v
    },
    Option(flag: "group-ring-limit", help: "most members a group call rings (default 16)", repeatable: false) {
      c, v throws(ConfigurationError) in
      let limit: Int = try number(v, "group-ring-limit")
      guard (1...Limits.maxGroupMembers - 1).contains(limit) else {
        throw ConfigurationError("--group-ring-limit must be 1...\(Limits.maxGroupMembers - 1)")
      }
      c.groupRingLimit = limit
    },
    choice(
      "group-invite-policy",
      "members | owner: who may ring more people into a running group call (default members: anyone in it)",
      \.groupInvitePolicy),
    limit(
      "max-outgoing-bytes",
      "bytes queued to a socket whose reader lags before it is closed with 4429 (default 2097152)", \.maxOutgoingBytes,
      atLeast: 131_072),
    limit(
      "max-unacked-bytes", "bytes of unacknowledged messages a session keeps for resume (default 1048576)",
      \.maxUnackedBytes, atLeast: 65_536),
    limit(
      "messages-per-second", "messages a socket may send per second, bursts of 4 s (default 50; 0 = no limit)",
      \.messagesPerSecond, atLeast: 0),
    limit(
      "invites-per-minute", "calls a user may start per minute, bursts of 10 (default 30; 0 = no limit)",
      \.invitesPerMinute, atLeast: 0),
    limit(
      "max-live-calls-per-user", "calls a user may have ringing or connected as the caller (default 8)",
      \.maxLiveCallsPerUser, atLeast: 1),
    limit(
      "max-devices-per-user", "devices a user may have signed in at once (default 16)", \.maxDevicesPerUser, atLeast: 1),
    limit("max-blocks-per-user", "users one user may block (default 1000)", \.maxBlocksPerUser, atLeast: 1),
    limit(
      "max-connections-per-ip", "open WebSockets per IP address (default 256; 0 = no limit)",
      \.maxConnectionsPerAddress, atLeast: 0),
    limit(
      "http-requests-per-second",
      "HTTP requests per second per IP address, bursts of 5 s, /healthz excepted (default 20; 0 = no limit)",
      \.httpRequestsPerSecond, atLeast: 0),
    limit(
      "max-push-registrations-per-user", "push registrations a user may have (default 16)",
      \.maxPushRegistrationsPerUser, atLeast: 1),
  ]

  /// An option that sets one of `limits` to a number of at least `minimum`.
  private static func limit<T: LosslessStringConvertible & Comparable & Sendable>(
    _ flag: String, _ help: String, _ field: WritableKeyPath<ServerLimits, T> & Sendable, atLeast minimum: T
  ) -> Option {
    Option(flag: flag, help: help, repeatable: false) { c, v throws(ConfigurationError) in
      let value: T = try number(v, flag)
      guard value >= minimum else { throw ConfigurationError("--\(flag) must be at least \(minimum)") }
      c.limits[keyPath: field] = value
    }
  }

  /// An option that sets a whole number within `range`.
  private static func whole(
    _ flag: String, _ help: String, _ field: WritableKeyPath<ServerConfiguration, Int> & Sendable,
    in range: ClosedRange<Int>
  ) -> Option {
    Option(flag: flag, help: help, repeatable: false) { c, v throws(ConfigurationError) in
      guard let value = Int(v), range.contains(value) else {
        throw ConfigurationError("--\(flag) must be \(range.lowerBound) to \(range.upperBound)")
      }
      c[keyPath: field] = value
    }
  }

  /// One of an enumeration's raw values, in any case.
  private static func choice<T: RawRepresentable<String> & CaseIterable & Sendable>(
    _ flag: String, _ help: String, _ field: WritableKeyPath<ServerConfiguration, T> & Sendable
  ) -> Option {
    Option(flag: flag, help: help, repeatable: false) { c, v throws(ConfigurationError) in
      guard let value = T(rawValue: v.lowercased()) else {
        let names = T.allCases.map(\.rawValue)
        let listed = names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
        throw ConfigurationError("--\(flag) must be \(listed)")
      }
      c[keyPath: field] = value
    }
  }

  /// A shared secret: at least 16 bytes, so that it cannot be guessed by trying.
  private static func secret(
    _ flag: String, _ help: String, _ field: WritableKeyPath<ServerConfiguration, String?> & Sendable
  ) -> Option {
    Option(flag: flag, help: help, repeatable: false) { c, v throws(ConfigurationError) in
      guard v.utf8.count >= 16 else { throw ConfigurationError("--\(flag) must be at least 16 bytes") }
      c[keyPath: field] = v
    }
  }

  private static var commandOptions: [CommandOption] {
    options.map { CommandOption($0.flag, $0.repeatable ? .repeatable : .value, help: $0.help) }
  }

  public static var usage: String {
    "usage: dialtone-server [options]\n\nEvery option can also be set as an environment variable (flags win).\n\n"
      + CommandOption.usage(commandOptions, environment: true)
  }

  /// Parses with the rules every Dialtone executable shares (`ArgumentList`); `DIALTONE_*`
  /// variables stand in for options not given.
  public static func parse(arguments: [String], environment: [String: String]) throws(ConfigurationError)
    -> ServerConfiguration
  {
    let parsed: ArgumentList
    do {
      parsed = try ArgumentList(arguments, options: commandOptions, environment: environment)
    } catch {
      throw ConfigurationError(error.message)
    }
    var configuration = ServerConfiguration()
    for (option, values) in parsed.given(in: commandOptions) {
      guard let apply = options.first(where: { $0.flag == option.name })?.apply else { continue }
      for value in values { try apply(&configuration, value) }
    }
    let apnsParts = [configuration.apnsKeyFile, configuration.apnsKeyID, configuration.apnsTeamID]
    if apnsParts.contains(where: { $0 != nil }) && apnsParts.contains(where: { $0 == nil }) {
      throw ConfigurationError("APNs needs all of --apns-key-file, --apns-key-id and --apns-team-id")
    }
    if (configuration.tlsCertificateFile == nil) != (configuration.tlsKeyFile == nil) {
      throw ConfigurationError("TLS needs both --tls-cert and --tls-key")
    }
    let liveKitParts = [configuration.liveKitURL, configuration.liveKitAPIKey, configuration.liveKitAPISecret]
    if liveKitParts.contains(where: { $0 != nil }) && liveKitParts.contains(where: { $0 == nil }) {
      throw ConfigurationError("LiveKit needs all of --livekit-url, --livekit-api-key and --livekit-api-secret")
    }
    if configuration.janusURL != nil && configuration.liveKitURL != nil {
      throw ConfigurationError("group calls use one SFU: give --janus-url or --livekit-url, not both")
    }
    if configuration.limits.maxOutgoingBytes <= configuration.limits.maxUnackedBytes {
      // A resume writes every unacknowledged message at once: it must fit the outgoing queue.
      throw ConfigurationError("--max-outgoing-bytes must be larger than --max-unacked-bytes")
    }
    if configuration.writeBehindLogStripes > 0 && !configuration.writeBehindSessions {
      throw ConfigurationError("--write-behind-log-stripes needs --cluster-sessions write-behind")
    }
    if configuration.redisURL != nil && configuration.databaseURL == nil {
      throw ConfigurationError("--redis-url (a cluster) needs --database-url: the nodes share one PostgreSQL database")
    }
    if configuration.redisURL != nil && configuration.authSecret == nil {
      throw ConfigurationError("--redis-url (a cluster) needs --auth-secret: every node must accept the same tokens")
    }
    if !configuration.turnURLs.isEmpty && configuration.turnSecret == nil {
      throw ConfigurationError("--turn-url needs --turn-secret (coturn's static-auth-secret)")
    }
    return configuration
  }
}
