import DialtoneAuth
import DialtoneCalls
import DialtoneCluster
import DialtoneCrypto
import DialtoneProtocol
import DialtoneRedis
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneServer
@testable import DialtoneStorage

struct ConfigurationTests {
  @Test func defaultsFlagsAndEnvironment() throws {
    let defaults = try ServerConfiguration.parse(arguments: [], environment: [:])
    #expect(defaults.host == "127.0.0.1" && defaults.port == 8080 && defaults.dataDirectory == "./data")
    #expect(defaults.authSecret == nil)

    let parsed = try ServerConfiguration.parse(
      arguments: [
        "--port", "9000", "--data-dir=/tmp/x", "--turn-url", "turn:a:3478", "--turn-url", "turns:a:443?transport=tcp",
      ],
      environment: [
        "DIALTONE_HOST": "0.0.0.0", "DIALTONE_PORT": "7000", "DIALTONE_TURN_SECRET": "s3cret",
        "DIALTONE_STUN_URL": "stun:a:3478,stun:b:3478",
      ])
    #expect(parsed.host == "0.0.0.0")
    #expect(parsed.port == 9000)  // the flag wins over the environment
    #expect(parsed.dataDirectory == "/tmp/x")
    #expect(parsed.turnURLs == ["turn:a:3478", "turns:a:443?transport=tcp"])
    #expect(parsed.stunURLs == ["stun:a:3478", "stun:b:3478"])
    #expect(parsed.turnSecret == "s3cret")
    #expect(defaults.ackDelay == 0.04)
    #expect(try ServerConfiguration.parse(arguments: ["--ack-delay-ms", "0"], environment: [:]).ackDelay == 0)
  }

  @Test func blockedCallsInHistoryIsHiddenUnlessAskedFor() throws {
    #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).blockedCallsInHistory == .hide)
    let shown = try ServerConfiguration.parse(arguments: ["--blocked-calls-in-history", "show"], environment: [:])
    #expect(shown.blockedCallsInHistory == .show)
    let fromEnvironment = try ServerConfiguration.parse(
      arguments: [], environment: ["DIALTONE_BLOCKED_CALLS_IN_HISTORY": "SHOW"])
    #expect(fromEnvironment.blockedCallsInHistory == .show)
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--blocked-calls-in-history", "yes"], environment: [:])
    }
  }

  @Test func clusterSessionsAreStoreFirstUnlessWriteBehindIsAskedFor() throws {
    let defaults = try ServerConfiguration.parse(arguments: [], environment: [:])
    #expect(!defaults.writeBehindSessions && defaults.batchWindowMilliseconds == 0)
    let behind = try ServerConfiguration.parse(
      arguments: ["--cluster-sessions", "write-behind", "--batch-window-ms", "10"], environment: [:])
    #expect(behind.writeBehindSessions && behind.batchWindowMilliseconds == 10)
    let first = try ServerConfiguration.parse(
      arguments: [], environment: ["DIALTONE_CLUSTER_SESSIONS": "store-first"])
    #expect(!first.writeBehindSessions)
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--cluster-sessions", "behind"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--batch-window-ms", "41"], environment: [:])
    }
  }

  @Test func theNodeLogsStripeCountIsCheckedAndNeedsWriteBehind() throws {
    #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).writeBehindLogStripes == 0)
    let striped = try ServerConfiguration.parse(
      arguments: ["--cluster-sessions", "write-behind", "--write-behind-log-stripes", "8"], environment: [:])
    #expect(striped.writeBehindLogStripes == 8)
    for bad in ["-1", "1025", "eight"] {
      #expect(throws: ConfigurationError.self) {
        try ServerConfiguration.parse(
          arguments: ["--cluster-sessions", "write-behind", "--write-behind-log-stripes", bad], environment: [:])
      }
    }
    // Store-first has no log: refused rather than ignored.
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--write-behind-log-stripes", "8"], environment: [:])
    }
    var configuration = striped
    configuration.redisURL = "redis://127.0.0.1:6379"
    let redis = try #require(try DialtoneServer.clusterRedis(configuration))
    let settings = DialtoneServer.clusterSettings(
      configuration, redis: redis, node: "n", log: Log(level: .error, subsystem: "t"))
    #expect(settings.logStripes == 8)
  }

  @Test func writeBehindSessionsAreRefusedOnARedisClusterAtStartUp() async throws {
    // Nothing is opened before the check: no Redis, PostgreSQL or data directory is needed.
    for url in [
      "redis-cluster://127.0.0.1:1", "rediss-cluster://127.0.0.1:1", "redis://127.0.0.1:1,127.0.0.1:2",
    ] {
      var configuration = ServerConfiguration()
      configuration.dataDirectory = NSTemporaryDirectory() + "dialtone-wb-\(UUID().uuidString)"
      configuration.redisURL = url
      configuration.writeBehindSessions = true
      await #expect(throws: ConfigurationError.self) { _ = try await DialtoneServer(configuration: configuration) }
      do {
        _ = try DialtoneServer.clusterRedis(configuration)
        Issue.record("\(url) with write-behind was accepted")
      } catch {
        #expect(error.description.contains("--cluster-sessions write-behind needs one Redis"))
      }
      #expect(!FileManager.default.fileExists(atPath: configuration.dataDirectory))
      // Store-first runs on a Redis Cluster.
      configuration.writeBehindSessions = false
      #expect(try DialtoneServer.clusterRedis(configuration)?.clusterSeeds != nil)
    }
    var one = ServerConfiguration()
    one.redisURL = "redis://127.0.0.1:6379"
    one.writeBehindSessions = true
    #expect(try DialtoneServer.clusterRedis(one)?.clusterSeeds == nil)
  }

  @Test func aWriteBehindNodesInboxOutlivesTheResumeWindow() throws {
    var configuration = ServerConfiguration()
    configuration.redisURL = "redis://127.0.0.1:6379"
    configuration.resumeWindow = 600
    let log = Log(level: .error, subsystem: "t")
    let redis = try #require(try DialtoneServer.clusterRedis(configuration))
    // Store-first keeps nothing in an inbox for a resume: its expiry stays as it was.
    #expect(
      DialtoneServer.clusterSettings(configuration, redis: redis, node: "n", log: log).inboxExpiry == .seconds(120))
    configuration.writeBehindSessions = true
    let settings = DialtoneServer.clusterSettings(configuration, redis: redis, node: "n", log: log)
    #expect(settings.inboxExpiry > settings.sessionExpiry && settings.sessionExpiry > .seconds(600))
    // A short window keeps the default.
    configuration.resumeWindow = 30
    #expect(
      DialtoneServer.clusterSettings(configuration, redis: redis, node: "n", log: log).inboxExpiry == .seconds(120))
  }

  @Test func theGroupInvitePolicyIsAnyMemberUnlessOwnerIsAskedFor() throws {
    #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).groupInvitePolicy == .members)
    let owner = try ServerConfiguration.parse(arguments: ["--group-invite-policy", "owner"], environment: [:])
    #expect(owner.groupInvitePolicy == .owner)
    #expect(
      try ServerConfiguration.parse(arguments: [], environment: ["DIALTONE_GROUP_INVITE_POLICY": "owner"])
        .groupInvitePolicy == .owner)
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--group-invite-policy", "everyone"], environment: [:])
    }
  }

  @Test func badValuesAreClearErrors() {
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--port", "eighty"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--port", "70000"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--nope", "1"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--auth-secret", "short"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--turn-url", "turn:a"], environment: [:])
    }
    #expect(throws: ConfigurationError.self) { try ServerConfiguration.parse(arguments: ["--port"], environment: [:]) }
    #expect(throws: ConfigurationError.self) {
      try ServerConfiguration.parse(arguments: ["--ack-delay-ms", "5000"], environment: [:])
    }
  }

  @Test func limitsAreOptionsWithSaneDefaults() throws {
    let defaults = try ServerConfiguration.parse(arguments: [], environment: [:]).limits
    #expect(defaults == ServerLimits())
    #expect(defaults.maxOutgoingBytes > defaults.maxUnackedBytes && defaults.maxConnectionsPerAddress == 256)
    let parsed = try ServerConfiguration.parse(
      arguments: [
        "--max-outgoing-bytes", "4194304", "--messages-per-second", "0", "--invites-per-minute", "6",
        "--max-devices-per-user", "3", "--max-connections-per-ip", "0", "--http-requests-per-second", "2.5",
        "--max-push-registrations-per-user", "4", "--max-live-calls-per-user", "2",
      ],
      environment: ["DIALTONE_MAX_UNACKED_BYTES": "262144"]
    ).limits
    #expect(parsed.maxOutgoingBytes == 4_194_304 && parsed.maxUnackedBytes == 262_144)
    #expect(parsed.messagesPerSecond == 0 && parsed.messageRate.isUnlimited)
    #expect(parsed.invitesPerMinute == 6 && parsed.maxDevicesPerUser == 3 && parsed.maxConnectionsPerAddress == 0)
    #expect(parsed.httpRequestsPerSecond == 2.5 && parsed.maxPushRegistrationsPerUser == 4)
    #expect(parsed.maxLiveCallsPerUser == 2)
    for bad in [
      ["--max-outgoing-bytes", "100"], ["--max-devices-per-user", "0"], ["--messages-per-second", "-1"],
      ["--max-outgoing-bytes", "200000", "--max-unacked-bytes", "300000"],
    ] {
      #expect(throws: ConfigurationError.self) { try ServerConfiguration.parse(arguments: bad, environment: [:]) }
    }
  }

  @Test func generatedSecretIsReusedAcrossStarts() throws {
    let directory = NSTemporaryDirectory() + "dialtone-secret-\(UUID().uuidString)"
    let first = try AuthSecret.resolve(configured: nil, dataDirectory: directory)
    let second = try AuthSecret.resolve(configured: nil, dataDirectory: directory)
    #expect(first == second)
    #expect(first.count >= 32)
    #expect(AuthSecret.load(dataDirectory: directory) == first)
    let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/auth-secret")
    #expect((attributes[.posixPermissions] as? Int) == 0o600)
  }

  @Test func turnCredentialsFollowCoturnsRestScheme() throws {
    let issuer = IceServerIssuer(
      stunURLs: ["stun:turn.example.com:3478"],
      turnURLs: ["turn:turn.example.com:3478?transport=udp"], turnSecret: "north", ttl: 3600)
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let servers = issuer.servers(for: "alice", now: now)
    #expect(servers.count == 2)
    #expect(servers[0].urls == ["stun:turn.example.com:3478"] && servers[0].username == nil)
    #expect(servers[1].username == "1700003600:alice")
    let expected = Base64.encode(HMAC.sha1(key: Array("north".utf8), message: Array("1700003600:alice".utf8)))
    #expect(servers[1].credential == expected)
  }

  @Test func theDatabasesPreparedStatementsAreCheckedAndCanBeTurnedOff() throws {
    #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).databasePreparedStatements == 256)
    let off = try ServerConfiguration.parse(arguments: ["--database-prepared-statements", "0"], environment: [:])
    #expect(off.databasePreparedStatements == 0)
    for bad in ["-1", "4097", "many"] {
      #expect(throws: ConfigurationError.self) {
        try ServerConfiguration.parse(arguments: ["--database-prepared-statements", bad], environment: [:])
      }
    }
  }
}
