import DialtoneAuth
import DialtoneCalls
import DialtoneCluster
import DialtoneCrypto
import DialtoneMetrics
import DialtoneNet
import DialtoneProtocol
import DialtoneRedis
import DialtoneSFU
import DialtoneSessions
import DialtoneStorage
import DialtoneSupport
import Foundation

/// The composition root: storage, hub, router, HTTP API and the network server, started together
/// and stopped in order (stop accepting → close sockets with 1001 → finish writes).
public final class DialtoneServer: Sendable {
  public static let version = "0.1.0"

  public let configuration: ServerConfiguration
  public let port: Int
  private let web: WebServer
  let hub: SignalingHub
  private let journal: CallJournal
  let pushes: PushDispatcher?
  private let sfu: (any SFUBackend)?
  private let metricsListener: MetricsListener?
  /// This node's part of a cluster (`--redis-url`); nil on a single server.
  let cluster: ClusterLink?
  /// The PostgreSQL stores (`--database-url`), closed by `stop`.
  private let postgres: (store: PostgresStore, liveCalls: PostgresLiveCallStore)?
  let observations: Observations
  /// Every route the public port serves (the API contract test checks docs/openapi.yaml has them).
  let routes: [(method: HTTPMethod, pattern: String)]
  private let log: Log

  public convenience init(
    configuration: ServerConfiguration, clock: any DialtoneClock = SystemClock(), store: (any ServerStore)? = nil
  ) async throws {
    try await self.init(configuration: configuration, clock: clock, store: store, liveCalls: nil)
  }

  /// `liveCalls` replaces the live-call journal's store (tests that stall or fail its writes);
  /// `remoteDevices`, `placement` and `sessionStore` are the devices, calls and sessions
  /// shared with other nodes (none on a single server; the cluster's own with `--redis-url`).
  init(
    configuration: ServerConfiguration, clock: any DialtoneClock, store: (any ServerStore)?,
    liveCalls: (any LiveCallStore)?, remoteDevices: any RemoteDevices = NoRemoteDevices(),
    placement: any CallPlacement = LocalCalls(), sessionStore: (any SessionStore)? = nil
  ) async throws {
    self.configuration = configuration
    // Checked before anything is opened: a URL the cluster cannot use is a start-up error.
    let redis = try Self.clusterRedis(configuration)
    let log = Log(level: configuration.logLevel, subsystem: "server", format: configuration.logFormat)
    self.log = log
    let observations = Observations(version: Self.version, clock: clock, log: log.scoped("calls"))
    self.observations = observations
    let secret = try AuthSecret.resolve(
      configured: configuration.authSecret, dataDirectory: configuration.dataDirectory)
    let authenticator = TokenAuthenticator(secret: secret, now: { clock.now })
    let iceServers = IceServerIssuer(
      stunURLs: configuration.stunURLs, turnURLs: configuration.turnURLs,
      turnSecret: configuration.turnSecret, ttl: configuration.turnTTL)
    var postgres: (store: PostgresStore, liveCalls: PostgresLiveCallStore)?
    if let url = configuration.databaseURL {
      postgres = try await PostgresStore.openBoth(
        url: url, preparedStatements: configuration.databasePreparedStatements)
    }
    self.postgres = postgres
    let callStore = try store ?? postgres?.store ?? SQLiteStore.open(dataDirectory: configuration.dataDirectory)
    let liveCalls =
      try liveCalls ?? postgres?.liveCalls ?? SQLiteLiveCallStore.open(dataDirectory: configuration.dataDirectory)
    let cluster = Self.makeClusterLink(
      configuration, redis: redis, liveCalls: liveCalls, metrics: observations.metrics.cluster, log: log)
    self.cluster = cluster
    let journal = CallJournal(store: liveCalls, log: log.scoped("journal"), fence: cluster)
    self.journal = journal
    pushes = try PushSetup.dispatcher(
      configuration: configuration, store: callStore, clock: clock, observations: observations,
      log: log.scoped("push"))
    let sink = FanOutSink(sinks: [observations] + (pushes.map { [$0] } ?? []))
    let router = CallRouter(
      settings: .init(
        ringTimeout: .seconds(configuration.ringTimeout), reconnectGrace: .seconds(configuration.reconnectGrace),
        maxLiveCallsPerUser: configuration.limits.maxLiveCallsPerUser))
    let executor = NetworkExecutor()
    // Real time: the hub's timers run on its network loop (no timer thread, no hop back to the
    // hub). A virtual clock a test passes stays as it is.
    let hubClock: any DialtoneClock = clock is SystemClock ? NetworkLoopClock(executor: executor, base: clock) : clock
    let sfu = try Self.makeSFU(configuration, clock: clock, log: log)
    self.sfu = sfu
    let groups = GroupCallRouter(
      settings: .init(
        ringLimit: configuration.groupRingLimit, ringTimeout: .seconds(configuration.ringTimeout),
        reconnectGrace: .seconds(configuration.reconnectGrace), invitePolicy: configuration.groupInvitePolicy))
    // A single server records every call id in its store itself: the desk holds them all in a
    // filter and asks the store only about an id it may hold. Cluster nodes record ids in a
    // shared store behind each other's backs: they ask about every new id.
    let usedIds = cluster == nil ? try liveCalls.usedCallIds() : nil
    let parts = HubParts(
      settings: .init(
        helloTimeout: .seconds(configuration.helloTimeout), resumeWindow: .seconds(configuration.resumeWindow),
        heartbeatSeconds: configuration.heartbeatSeconds, maxMessageBytes: Limits.maxMessageBytes,
        limits: configuration.limits, relayFastLane: configuration.relayFastLane),
      clock: hubClock, authenticator: authenticator, iceServers: iceServers,
      desk: CallDesk(router: router, groups: groups, groupCalls: sfu != nil, usedIds: usedIds), sfu: sfu,
      effectSink: sink, journal: journal, liveCalls: liveCalls, observations: observations,
      quality: callStore, remote: cluster ?? remoteDevices, placement: cluster ?? placement,
      store: cluster ?? sessionStore,
      log: log.scoped("signaling"))
    hub = SignalingHub(parts, executor: executor)
    let hub = self.hub
    journal.start { ticket in hub.deliver(.journalCommitted(ticket)) }
    let retention = clock.now.addingTimeInterval(-router.settings.endedRetention.seconds)
    let ended = try liveCalls.callsEnded(since: retention.millisecondsSince1970)
    if let cluster {
      // The live calls of the shared journal are other nodes' until their leases lapse: the
      // cluster takes over those nobody runs, now and whenever a node dies.
      await hub.restore([], ended: ended)
      do {
        try cluster.start(delivering: hub)
      } catch {
        throw ConfigurationError(
          "cannot reach the cluster's Redis at \(RedisConfiguration.redacted(configuration.redisURL ?? "")): \(error)")
      }
      log.info("node \(cluster.thisNode) joined the cluster")
    } else {
      let interrupted = try liveCalls.completeInterruptedGroupCalls()
      if interrupted > 0 { log.info("recorded \(interrupted) group call(s) that the restart ended (server-restart)") }
      await hub.restore(try liveCalls.liveCalls(), ended: ended)
    }
    await hub.loadBlocks(try await callStore.allBlocks())

    var routes = Router()
    APIRoutes(
      hub: hub, authenticator: authenticator, iceServers: iceServers, store: callStore, clock: clock,
      version: Self.version, observations: observations, limits: configuration.limits,
      directoryToken: configuration.directoryToken, blockedCalls: configuration.blockedCallsInHistory
    ).register(in: &routes)
    let httpLimiter = HTTPRateLimiter(rate: configuration.limits.httpRate, clock: clock)
    routes.gate = { request in await httpLimiter.check(request) }
    let metrics = observations.metrics
    routes.observer = { request, route, status, elapsed in
      let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
      let label = route ?? "unmatched"
      metrics.httpRequests.labels(request.method.rawValue, label, String(status)).increment()
      metrics.httpDuration.labels(label).observe(seconds)
    }
    BrowserClientRoutes(webRoot: configuration.webRoot).register(in: &routes)
    AdminRoutes(
      credential: configuration.adminToken.map { SharedSecretCredential(token: $0, realm: "dialtone admin") }, hub: hub,
      observations: observations,
      store: callStore, clock: clock, version: Self.version, webRoot: configuration.webRoot
    ).register(in: &routes)
    let metricsRoute = MetricsRoute(hub: hub, observations: observations)
    if let host = configuration.metricsHost, let port = configuration.metricsPort {
      metricsListener = try MetricsListener(host: host, port: port, route: metricsRoute, log: log.scoped("metrics"))
    } else {
      metricsListener = nil
      metricsRoute.register(in: &routes)
    }
    if let liveKit = sfu as? LiveKitSFU { LiveKitWebhookRoute(sfu: liveKit).register(in: &routes) }
    self.routes = routes.registered
    var webConfiguration = WebServerConfiguration(
      host: configuration.host, port: configuration.port,
      maxMessageBytes: Limits.maxMessageBytes, drainSeconds: configuration.drainSeconds)
    webConfiguration.keepAlive(heartbeatSeconds: configuration.heartbeatSeconds)
    webConfiguration.coalescingDelay = configuration.ackDelay
    webConfiguration.maxQueuedBytes = configuration.limits.maxOutgoingBytes
    if let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
      webConfiguration.tls = TLSFiles(certificateChain: certificate, privateKey: key)
    }
    let netLog = log.scoped("net")
    web = try WebServer(
      configuration: webConfiguration, router: routes, webSocketHandler: hub.socketHandler, executor: executor
    ) { level, message in
      switch level {
      case .info: netLog.info(message)
      case .warning: netLog.warning(message)
      }
    }
    port = web.port
    if let sfu {
      try await sfu.start { event in hub.deliver(.sfu(event)) }
    }
    if configuration.turnURLs.isEmpty && configuration.stunURLs.isEmpty {
      log.info(
        "no --turn-url/--stun-url configured: clients get an empty ICE server list (fine on one LAN, not across NATs)")
    }
    log.info("dialtone-server \(Self.version) listening on \(baseURL) (WebSocket /v1/ws)")
  }

  /// Graceful stop: no new connections, every socket closed with 1001 (their calls stay as they
  /// are, for the restarted server to carry on with), the journal written to the end. Bounded by
  /// `drainSeconds`.
  public func stop() async {
    await hub.prepareForShutdown()
    await web.stop()
    await metricsListener?.stop()
    await sfu?.shutdown()
    // A cluster node takes no more requests from other nodes, writes the journal to the end,
    // has the hub release what it held for it (answers and relays go to the cluster's sender),
    // and only then leaves, the sender writing out everything queued.
    cluster?.stopReading()
    journal.close()
    await hub.drained()
    cluster?.stop()
    await pushes?.stop()
    postgres?.liveCalls.close()
    postgres?.store.close()
    log.info("stopped")
  }

  /// The Redis of `--redis-url` (nil: a single server), refused when the sessions' mode cannot
  /// run on it: write-behind's resume script reads two nodes' inboxes, keys in two slots, which a
  /// Redis Cluster refuses (CROSSSLOT); its layout there is not built (docs/architecture.md, 7).
  static func clusterRedis(_ configuration: ServerConfiguration) throws(ConfigurationError) -> RedisConfiguration? {
    guard let url = configuration.redisURL else { return nil }
    let redis: RedisConfiguration
    do {
      redis = try RedisConfiguration(url: url)
    } catch {
      throw ConfigurationError("--redis-url: \(error)")
    }
    if configuration.writeBehindSessions && redis.clusterSeeds != nil {
      throw ConfigurationError(
        "--cluster-sessions write-behind needs one Redis: --redis-url names a Redis Cluster (redis-cluster://, rediss-cluster:// or several host:port), where write-behind's layout is not built; use --cluster-sessions store-first there"
      )
    }
    return redis
  }

  private static func makeClusterLink(
    _ configuration: ServerConfiguration, redis: RedisConfiguration?, liveCalls: any LiveCallStore,
    metrics: ClusterMetrics, log: Log
  ) -> ClusterLink? {
    guard let redis else { return nil }
    let name = configuration.nodeName ?? ProcessInfo.processInfo.hostName
    let safeName = String(name.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "-" }.prefix(64))
    let node = safeName + "-" + SecureRandom.token(byteCount: 4)
    if configuration.writeBehindSessions {
      log.warning("--cluster-sessions write-behind is incomplete (docs/deploy.md): for measurement, not production")
    }
    let settings = clusterSettings(configuration, redis: redis, node: node, log: log)
    return ClusterLink(settings: settings, liveCalls: liveCalls, metrics: metrics, log: log.scoped("cluster"))
  }

  /// The cluster link's settings from the configuration.
  static func clusterSettings(
    _ configuration: ServerConfiguration, redis: RedisConfiguration, node: String, log: Log
  ) -> ClusterLink.Settings {
    var settings = ClusterLink.Settings(redis: redis, node: node)
    // A session outlives its holder for the resume window, plus two refreshes of slack.
    settings.sessionExpiry = .seconds(configuration.resumeWindow) + settings.sessionRefresh * 2
    settings.maxUnackedBytes = configuration.limits.maxUnackedBytes
    if redis.clusterSeeds != nil && configuration.nodeExpirySeconds == nil {
      log.warning(
        "on a Redis Cluster a node whose heartbeat is on a failing shard cannot beat until its replica takes over: set --node-expiry above the failover time (2 x cluster-node-timeout + 1 s), or its calls are taken over while it runs them"
      )
    }
    if let expiry = configuration.nodeExpirySeconds {
      // Heartbeats stay three per expiry; a call's lease outlives a node's expiry.
      settings.nodeExpiry = .milliseconds(Int64(expiry * 1000))
      settings.heartbeat = settings.nodeExpiry / 3
      settings.lease = max(settings.lease, settings.nodeExpiry * 2)
    }
    if configuration.writeBehindSessions {
      settings.sessions = .writeBehind
      settings.batchWindow = .milliseconds(configuration.batchWindowMilliseconds)
      settings.logStripes = configuration.writeBehindLogStripes
      settings.leaseMargin = settings.nodeExpiry / 3
      // A node's inbox keeps the letters it did not store for the sessions' next resumes: it
      // must outlive them (it expires that long after its last letter), or a resume late in a
      // long --resume-window finds them gone.
      settings.inboxExpiry = max(settings.inboxExpiry, settings.sessionExpiry + settings.sessionRefresh)
    }
    return settings
  }

  private static func makeSFU(_ configuration: ServerConfiguration, clock: any DialtoneClock, log: Log) throws
    -> (any SFUBackend)?
  {
    if let url = configuration.liveKitURL, let key = configuration.liveKitAPIKey,
      let secret = configuration.liveKitAPISecret
    {
      do {
        return try LiveKitSFU(
          settings: .init(url: url, credentials: LiveKitCredentials(apiKey: key, apiSecret: secret)), clock: clock,
          log: log.scoped("livekit"))
      } catch {
        throw ConfigurationError("--livekit-url: \(error)")
      }
    }
    if let url = configuration.janusURL {
      if let host = URL(string: url)?.host, !["127.0.0.1", "localhost", "::1", "[::1]"].contains(host) {
        log.warning("--janus-url \(url) is not on loopback: Janus's API must not be reachable by anyone else")
      }
      return JanusSFU(
        settings: .init(url: url, apiSecret: configuration.janusAPISecret, adminKey: configuration.janusAdminKey),
        log: log.scoped("janus"))
    }
    return nil
  }

  /// The port of `--metrics-listen` (the kernel's choice for port 0), if configured.
  public var metricsPort: Int? { metricsListener?.port }

  public var baseURL: String {
    "\(configuration.tlsCertificateFile == nil ? "http" : "https")://\(configuration.host):\(port)"
  }
}
