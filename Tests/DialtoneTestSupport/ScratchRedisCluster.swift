import DialtoneRedis
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A throwaway Redis Cluster on 127.0.0.1: `shards` primaries with one replica each, made by
/// `redis-cli --cluster create`, a short `cluster-node-timeout` so that a killed primary's
/// replica takes over within a few seconds. Every wait is bounded; `stop` removes everything.
public actor ScratchRedisCluster {
  public nonisolated let directory: String
  /// The servers' ports: primaries first as created (each replica's primary is the one
  /// redis-cli chose).
  public nonisolated let ports: [Int]
  /// Set: every server speaks TLS only (clients, replication and the cluster bus) with these
  /// certificates.
  public nonisolated let tls: ScratchCertificates?
  /// Set: every server requires it (`requirepass`, and `masterauth` for its replica).
  public nonisolated let password: String?
  private var servers: [Int: Process] = [:]
  private let binary: String

  private init(directory: String, ports: [Int], binary: String, tls: ScratchCertificates?, password: String?) {
    self.directory = directory
    self.ports = ports
    self.binary = binary
    self.tls = tls
    self.password = password
  }

  public static func start(
    shards: Int = 3, nodeTimeout: Duration = .milliseconds(1000), tls: ScratchCertificates? = nil,
    password: String? = nil
  ) async throws -> ScratchRedisCluster {
    let binary = "/usr/bin/redis-server"
    guard FileManager.default.isExecutableFile(atPath: binary) else {
      throw ScratchProcess.Failure("no redis-server: run scripts/deps.sh (Debian's redis-server)")
    }
    // Another process may take a port (or its bus port) between the pick and the bind: then
    // every server goes and another set of ports is picked, up to three times.
    var lastError: Error = ScratchProcess.Failure("no start attempted")
    for _ in 0..<3 {
      let directory = NSTemporaryDirectory() + "dtrediscluster-\(UUID().uuidString.prefix(8).lowercased())"
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      let cluster = ScratchRedisCluster(
        directory: directory, ports: try freePorts(shards * 2), binary: binary, tls: tls, password: password)
      do {
        try await cluster.create(replicasPerShard: 1, nodeTimeout: nodeTimeout)
        return cluster
      } catch {
        let portTaken = cluster.logs.contains("Address already in use")
        await cluster.stop()
        guard portTaken else { throw error }
        lastError = error
      }
    }
    throw lastError
  }

  /// A fresh cluster for `body`, stopped afterwards whether `body` threw or not.
  public static func with<T>(
    isolation: isolated (any Actor)? = #isolation, nodeTimeout: Duration = .milliseconds(1000),
    tls: ScratchCertificates? = nil, password: String? = nil, _ body: (ScratchRedisCluster) async throws -> T
  ) async throws -> T {
    try await stopping(
      try await start(nodeTimeout: nodeTimeout, tls: tls, password: password), stop: { await $0.stop() }, body)
  }

  /// The URL that names every server as a seed.
  public nonisolated var url: String {
    let seeds = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
    let credentials = password.map { ":\($0)@" } ?? ""
    guard let tls else { return "redis-cluster://\(credentials)\(seeds)" }
    return "rediss-cluster://\(credentials)\(seeds)?ca-file=\(tls.ca)"
  }

  public nonisolated func connect(commandTimeout: Duration = .seconds(5)) throws -> RedisClusterConnection {
    try RedisClusterConnection(
      RedisConfiguration(url: url, connectTimeout: .seconds(2), commandTimeout: commandTimeout))
  }

  /// A connection to one server only (no routing), to look at it or send it CLUSTER commands.
  public nonisolated func direct(_ port: Int) throws -> RedisConnection {
    let credentials = password.map { ":\($0)@" } ?? ""
    // No WAIT of its own: the tests see the node as it is (and probe its replicas themselves).
    let url =
      tls.map { "rediss://\(credentials)127.0.0.1:\(port)?ca-file=\($0.ca)&wait-replicas=0" }
      ?? "redis://\(credentials)127.0.0.1:\(port)?wait-replicas=0"
    return try RedisConnection(url: url, connectTimeout: .seconds(2), commandTimeout: .seconds(5))
  }

  /// SIGKILL to one server, as a crash would.
  public func kill(port: Int) async {
    guard let server = servers.removeValue(forKey: port), server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGKILL)
    _ = await eventually(within: 10) { !server.isRunning }
  }

  /// SIGSTOP to one server: it keeps its connections but answers nothing (a replica stalled
  /// under load) until `resume`.
  public func pause(port: Int) {
    guard let server = servers[port], server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGSTOP)
  }

  public func resume(port: Int) {
    guard let server = servers[port], server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGCONT)
  }

  /// The ports of a primary's replicas, from its `INFO replication` ("slave0:ip=…,port=…,…").
  public nonisolated func replicaPorts(of port: Int) throws -> [Int] {
    let connection = try direct(port)
    defer { connection.close() }
    let info = try connection.command(["INFO", "replication"]).string ?? ""
    return info.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("slave") && $0.contains(":ip=") }.compactMap {
      line in
      line.split(separator: ",").first(where: { $0.hasPrefix("port=") }).flatMap { Int($0.dropFirst(5)) }
    }
  }

  /// Whether every live server sees the cluster whole (`cluster_state:ok`) with `primaries`
  /// primaries serving slots and every replica, and every primary's replicas are in sync (a write a replica has
  /// not got yet would be lost with its primary).
  public func isHealthy(primaries: Int, replicasEach: Int = 1) -> Bool {
    for port in servers.keys {
      guard let connection = try? direct(port) else { return false }
      defer { connection.close() }
      guard let info = try? connection.command(["CLUSTER", "INFO"]).string, info.contains("cluster_state:ok"),
        let slots = try? connection.command(["CLUSTER", "SLOTS"]).elements,
        Set(slots.compactMap { $0.elements?[2].elements?[1].integer }).count == primaries,
        let replication = try? connection.command(["INFO", "replication"]).string
      else { return false }
      // Every server knows every replica and its primary (a connection that reads the map from
      // a server that does not know a replica yet would not wait for it).
      guard let nodes = try? connection.command(["CLUSTER", "NODES"]).string else { return false }
      let replicas = nodes.split(whereSeparator: \.isNewline).filter { line in
        let fields = line.split(separator: " ")
        guard fields.count > 3 else { return false }
        let flags = fields[2].split(separator: ",")
        return flags.contains("slave") && !flags.contains("fail") && !flags.contains("fail?") && fields[3] != "-"
      }
      guard replicas.count == primaries * replicasEach else { return false }
      if replication.contains("role:master") {
        let online = replication.components(separatedBy: "state=online").count - 1
        guard online == replicasEach, confirmsWrites(connection, port: port, slots: slots, replicas: replicasEach)
        else { return false }
      }
    }
    return true
  }

  /// Whether the primary on `port` streams its writes to its replicas: a probe write in one of
  /// its slots (gone 100 ms later) that `replicas` replicas confirm (`WAIT`). "state=online" is
  /// not enough: after a full sync the primary sends a replica nothing until the replica's first
  /// `REPLCONF ACK`, which can come up to a second later (replicas ack once a second), so a
  /// cluster that looks whole refuses the first writes a client waits for.
  private nonisolated func confirmsWrites(
    _ connection: RedisConnection, port: Int, slots: [RedisReply], replicas: Int
  ) -> Bool {
    let owned = slots.compactMap { range -> ClosedRange<Int>? in
      guard let parts = range.elements, parts.count >= 3, parts[2].elements?[1].integer == Int64(port),
        let start = parts[0].integer, let end = parts[1].integer, start <= end
      else { return nil }
      return Int(start)...Int(end)
    }
    guard !owned.isEmpty else { return true }  // a primary that serves no slot takes no writes
    guard
      let key = (0..<100_000).lazy.map({ "dt-probe-\($0)" }).first(where: { key in
        owned.contains { $0.contains(RedisSlot.of(key)) }
      })
    else { return false }
    let replies = try? connection.pipeline([
      ["SET", .string(key), "1", "PX", "100"], ["WAIT", .integer(Int64(replicas)), "100"],
    ])
    return (replies?.last?.integer ?? 0) >= Int64(replicas)
  }

  public func stop() async {
    for port in Array(servers.keys) {
      if let server = servers[port], server.isRunning {
        server.terminate()
        _ = await eventually(within: 2) { !server.isRunning }
      }
      await kill(port: port)
    }
    try? FileManager.default.removeItem(atPath: directory)
  }

  public nonisolated var logs: String {
    ports.map { port in
      "== \(port)\n" + ((try? String(contentsOfFile: "\(directory)/\(port)/redis.log", encoding: .utf8)) ?? "")
    }.joined(separator: "\n")
  }

  private func create(replicasPerShard: Int, nodeTimeout: Duration) async throws {
    for port in ports {
      let home = "\(directory)/\(port)"
      try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
      let log = try ScratchProcess.appendingLog(home + "/redis.log")
      var listening = ["--port", String(port)]
      if let tls {
        listening = [
          "--port", "0", "--tls-port", String(port), "--tls-cluster", "yes", "--tls-replication", "yes",
          "--tls-cert-file", tls.server, "--tls-key-file", tls.serverKey, "--tls-ca-cert-file", tls.ca,
          "--tls-auth-clients", "no",
        ]
      }
      if let password { listening += ["--requirepass", password, "--masterauth", password] }
      servers[port] = try ScratchProcess.spawn(
        [binary] + listening + [
          "--bind", "127.0.0.1", "--cluster-enabled", "yes",
          "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
          String(nodeTimeout.components.seconds * 1000 + nodeTimeout.components.attoseconds / 1_000_000_000_000_000),
          // A replica that lost its primary seconds ago still takes over (the default refuses one
          // whose link has been down for 10 node timeouts, counted oddly on a fresh cluster).
          "--cluster-replica-validity-factor", "0",
          "--save", "", "--appendonly", "no", "--dir", home, "--daemonize", "no", "--logfile", "",
        ], in: home, output: log)
    }
    for port in ports {
      let up = await eventually(within: 10) {
        (try? self.direct(port).command(["PING"])) == .status("PONG")
      }
      guard up else { throw ScratchProcess.Failure("redis-server :\(port) did not start: \(logs.suffix(2000))") }
    }
    let cli = Process()
    cli.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
    var arguments: [String] = []
    if let tls { arguments += ["--tls", "--cacert", tls.ca] }
    if let password { arguments += ["-a", password, "--no-auth-warning"] }
    arguments += ["--cluster", "create"]
    arguments += ports.map { "127.0.0.1:\($0)" }
    arguments += ["--cluster-replicas", String(replicasPerShard), "--cluster-yes"]
    cli.arguments = arguments
    let output = try ScratchProcess.appendingLog(directory + "/create.log")
    cli.standardOutput = output
    cli.standardError = output
    cli.standardInput = FileHandle.nullDevice
    try cli.run()
    let created = await eventually(within: 30) { !cli.isRunning }
    let createLog = (try? String(contentsOfFile: directory + "/create.log", encoding: .utf8)) ?? ""
    guard created, cli.terminationStatus == 0 else {
      if cli.isRunning { cli.terminate() }
      throw ScratchProcess.Failure("redis-cli --cluster create failed: \(createLog.suffix(2000))")
    }
    let primaries = ports.count / (replicasPerShard + 1)
    guard await eventually(within: 20, { self.isHealthy(primaries: primaries) }) else {
      throw ScratchProcess.Failure("the cluster did not become healthy: \(createLog.suffix(1000))")
    }
  }

  /// Ports free on 127.0.0.1 whose cluster bus ports (port + 10000) are free too.
  private static func freePorts(_ count: Int) throws -> [Int] {
    var picked: [Int] = []
    var candidate = 20000 + Int.random(in: 0..<9000)
    var tries = 0
    while picked.count < count {
      tries += 1
      guard tries < 2000 else { throw ScratchProcess.Failure("no free port pairs for a Redis Cluster") }
      candidate = candidate >= 29990 ? 20000 : candidate + 1
      guard (try? LoopbackListener(port: candidate)) != nil, (try? LoopbackListener(port: candidate + 10000)) != nil
      else { continue }
      picked.append(candidate)
    }
    return picked
  }
}

/// One scratch Redis Cluster for a whole suite (`@Suite(.scratchRedisCluster)`), reached through
/// `SharedRedisCluster.cluster()`.
public struct ScratchRedisClusterTrait: SuiteTrait, TestScoping {
  public init() {}

  public var isRecursive: Bool { false }

  public func provideScope(
    for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
  ) async throws {
    try await ScratchRedisCluster.with { cluster in
      try await SharedRedisCluster.$current.withValue(cluster) { try await function() }
    }
  }
}

extension Trait where Self == ScratchRedisClusterTrait {
  public static var scratchRedisCluster: Self { Self() }
}

public enum SharedRedisCluster {
  public struct NotRunning: Error, CustomStringConvertible {
    public var description: String { "no scratch Redis Cluster: the suite needs the .scratchRedisCluster trait" }
  }

  @TaskLocal public static var current: ScratchRedisCluster?

  public static func cluster() throws -> ScratchRedisCluster {
    guard let current else { throw NotRunning() }
    return current
  }
}
