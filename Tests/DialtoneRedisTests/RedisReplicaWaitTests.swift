import DialtoneCluster
import DialtoneMetrics
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// `RedisClusterConnection`'s WAIT against a fake one-shard cluster whose replies the test
/// scripts: how many replicas the map lists, what each WAIT answers, and when the map changes.
@Suite struct RedisReplicaWaitTests {
  @Test func aWriteTooFewReplicasConfirmedIsRefusedAfterASecondWait() throws {
    let shard = try FakeShard(replicas: 1, waits: [0, 0, 0, 0, 0, 0])
    defer { shard.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try shard.connect(
      observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }

    let single = #expect(throws: RedisError.self) { try redis.set("k", "v") }
    #expect(single?.serverPrefix == "NOREPLICAS")
    // A pipeline answers the refusal for each command of the shard (its other replies stand).
    let replies = try redis.pipeline([["SET", "k", "w"], ["GET", "k"]])
    #expect(replies.allSatisfy { if case .error("NOREPLICAS", _) = $0 { true } else { false } })
    let transaction = #expect(throws: RedisError.self) {
      try redis.transaction([["SET", "{t}a", "1"], ["SET", "{t}b", "2"]])
    }
    #expect(transaction?.serverPrefix == "NOREPLICAS")
    // Each round trip waited twice (1 replica each time), the map read again in between.
    #expect(shard.waits == Array(repeating: 1, count: 6))
    #expect(outcomes.current == [.unconfirmed, .unconfirmed, .unconfirmed])
  }

  @Test func aReplicaThatConfirmsOnTheSecondWaitIsLateButStored() throws {
    let shard = try FakeShard(replicas: 1, waits: [0, 1])
    defer { shard.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try shard.connect(
      observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [1, 1])
    #expect(outcomes.current == [.confirmedLate])
  }

  @Test func aReplicaTheClusterMarkedFailedStopsBeingWaitedFor() throws {
    let shard = try FakeShard(replicas: 1, waits: [0])
    defer { shard.stop() }
    // The replica is marked failed while the first WAIT runs: the map read before a second WAIT
    // lists no replica left to wait for, so the write stands (no replica could take over).
    shard.afterWait = { $0.replicaHealth = "fail" }
    let redis = try shard.connect()
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [1])
    #expect(try redis.set("k", "w"))
    #expect(shard.waits == [1], "no WAIT for a shard whose only replica failed")
  }

  @Test func theSettingSaysHowManyReplicasCappedAtThoseTheShardHas() throws {
    let shard = try FakeShard(replicas: 2, waits: [])
    defer { shard.stop() }
    for (setting, expected) in [(0, [Int]()), (1, [1]), (2, [2]), (5, [2])] {
      shard.state.withLock { $0.waits = [] }
      let redis = try shard.connect(replicas: setting)
      defer { redis.close() }
      #expect(try redis.set("k", "v"))
      #expect(shard.waits == expected, "wait-replicas=\(setting)")
    }
  }

  @Test func aReplicaAddedLaterIsWaitedForOnceTheMapIsReadAgain() throws {
    let shard = try FakeShard(replicas: 0, waits: [])
    defer { shard.stop() }
    let clock = ManualClock()
    let redis = try shard.connect(clock: clock)
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [], "no replica: nothing to wait for")
    shard.state.withLock { $0.replicas = 1 }
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [], "the map is not due yet")
    clock.advance(by: .seconds(5))
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [1], "the map read again lists the new replica")
  }

  @Test func aWaitThatCountsAReplicaTheMapLacksHasTheMapReadAgain() throws {
    let shard = try FakeShard(replicas: 1, waits: [2])
    defer { shard.stop() }
    let redis = try shard.connect(replicas: 2, clock: ManualClock())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(shard.waits == [1])
    // Two replicas confirmed while the map lists one: the next command reads the map first.
    shard.state.withLock { $0.replicas = 2 }
    let maps = shard.mapReads
    #expect(try redis.set("k", "w"))
    #expect(shard.mapReads > maps)
    #expect(shard.waits == [1, 2])
  }

  @Test func aNodesMetricsCountLateAndRefusedRoundTrips() throws {
    let registry = MetricsRegistry()
    let metrics = ClusterMetrics(registry: registry)
    let shard = try FakeShard(replicas: 1, waits: [0, 1, 0, 0])
    defer { shard.stop() }
    let redis = try shard.connect(observer: metrics.replicaObserver())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(throws: RedisError.self) { try redis.set("k", "w") }
    let text = PrometheusTextFormat.render(registry)
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="late"} 1"#), "\(text)")
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="unconfirmed"} 1"#))
  }

  @Test func waitSettingsComeFromTheURL() throws {
    let url = "redis-cluster://127.0.0.1:7000,127.0.0.1:7001?wait-replicas=2&wait-timeout-ms=250"
    let configuration = try RedisConfiguration(url: url)
    #expect(configuration.replicaWait.replicas == 2)
    #expect(configuration.replicaWait.timeout == .milliseconds(250))
    #expect(try RedisConfiguration(url: "redis-cluster://h:1").replicaWait == .standard)
    #expect(try RedisConfiguration(url: "redis-cluster://h:1?wait-replicas=0").replicaWait.replicas == 0)
    for bad in [
      "redis-cluster://h:1?wait-replicas=-1", "redis-cluster://h:1?wait-replicas=x",
      "redis-cluster://h:1?wait-timeout-ms=0", "redis-cluster://h:1?ca-file=x",
    ] {
      #expect(throws: RedisError.self, "\(bad)") { try RedisConfiguration(url: bad) }
    }
  }
}

/// One primary serving every slot, with `replicas` replicas in its map; each WAIT answers the
/// next of `script` (all the replicas asked for once it runs out) and is logged.
private final class FakeShard: Sendable {
  struct State {
    var replicas: Int
    var replicaHealth = "online"
    var script: [Int64]
    var waits: [Int] = []
    var mapReads = 0
  }
  typealias Hook = @Sendable (inout State) -> Void
  let state: Locked<State>
  private let hook: Locked<Hook?>
  private let server: FakeRedisServer

  /// Runs after each WAIT is answered (a change the cluster makes meanwhile).
  var afterWait: Hook? {
    get { hook.current }
    set { hook.withLock { $0 = newValue } }
  }
  var waits: [Int] { state.current.waits }
  var mapReads: Int { state.current.mapReads }

  init(replicas: Int, waits: [Int64]) throws {
    let state = Locked(State(replicas: replicas, script: waits))
    let hook = Locked<Hook?>(nil)
    let port = Locked<Int64>(0)
    self.state = state
    self.hook = hook
    server = try FakeRedisServer { command in Self.answer(command, state, hook, port: port.current) }
    port.withLock { [server] in $0 = Int64(server.port) }
  }

  func stop() { server.stop() }

  func connect(
    replicas: Int = 1, clock: any DialtoneClock = SystemClock(), observer: RedisReplicaObserver? = nil
  ) throws -> RedisClusterConnection {
    var configuration = try RedisConfiguration(url: "redis-cluster://127.0.0.1:\(server.port)")
    configuration.replicaWait = RedisReplicaWait(
      replicas: replicas, timeout: .milliseconds(10), attempts: 2, observer: observer)
    return try RedisClusterConnection(configuration, failoverWait: .milliseconds(100), clock: clock) { _ in }
  }

  private static func text(_ string: String) -> RedisReply { .bulk(Array(string.utf8)) }

  private static func answer(
    _ command: [String], _ state: Locked<State>, _ hook: Locked<Hook?>, port: Int64
  ) -> RedisReply {
    let name = command.first?.uppercased() ?? ""
    let sub = command.dropFirst().first?.uppercased() ?? ""
    switch (name, sub) {
    case ("CLUSTER", "SLOTS"):
      let now = state.withLock { state in
        state.mapReads += 1
        return state
      }
      // CLUSTER SLOTS leaves failed replicas out.
      let listed = now.replicaHealth == "fail" ? 0 : now.replicas
      let replicas = (0..<listed).map { RedisReply.array([text("127.0.0.1"), .integer(port + 1 + Int64($0))]) }
      return .array([.array([.integer(0), .integer(16383), .array([text("127.0.0.1"), .integer(port)])] + replicas)])
    case ("CLUSTER", "SHARDS"):
      let now = state.current
      func node(_ port: Int64, _ role: String, _ health: String) -> RedisReply {
        .array([
          text("port"), .integer(port), text("ip"), text("127.0.0.1"), text("endpoint"), text("127.0.0.1"),
          text("role"), text(role), text("health"), text(health),
        ])
      }
      let nodes =
        [node(port, "master", "online")]
        + (0..<now.replicas).map { node(port + 1 + Int64($0), "replica", now.replicaHealth) }
      return .array([
        .array([text("slots"), .array([.integer(0), .integer(16383)]), text("nodes"), .array(nodes)])
      ])
    case ("WAIT", _):
      let asked = Int(sub) ?? -1
      let after = hook.current
      return state.withLock { state in
        state.waits.append(asked)
        let answer = state.script.isEmpty ? Int64(asked) : state.script.removeFirst()
        after?(&state)
        return .integer(answer)
      }
    case ("GET", _): return text("v")
    case ("EXEC", _): return .array([.status("OK"), .status("OK")])
    case ("PING", _): return .status("PONG")
    default: return .status("OK")
    }
  }
}
