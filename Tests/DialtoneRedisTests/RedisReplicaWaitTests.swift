import DialtoneCluster
import DialtoneMetrics
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// WAIT, on one server (`RedisConnection`, the replicas counted from `INFO replication`) and on a
/// Redis Cluster (`RedisClusterConnection`, the replicas listed by the slot map), against fakes
/// whose replies the test scripts: how many replicas there are, what each WAIT answers, and
/// when that changes. What both must do is one test run against each.
@Suite struct RedisReplicaWaitTests {
  @Test(arguments: ReplicaWaitTarget.allCases)
  func aWriteTooFewReplicasConfirmedIsRefusedAfterASecondWait(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 1, waits: [0, 0, 0, 0, 0, 0])
    defer { fake.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try fake.connect(observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }
    let counted = fake.replicaCounts

    let single = #expect(throws: RedisError.self) { try redis.set("k", "v") }
    #expect(single?.serverPrefix == "NOREPLICAS")
    // A pipeline answers the refusal for each of its commands (on a cluster, each of the
    // shard's; the other shards' replies stand).
    let replies = try redis.pipeline([["SET", "k", "w"], ["GET", "k"]])
    #expect(replies.count == 2)
    #expect(replies.allSatisfy { if case .error("NOREPLICAS", _) = $0 { true } else { false } })
    let transaction = #expect(throws: RedisError.self) {
      try redis.transaction([["SET", "{t}a", "1"], ["SET", "{t}b", "2"]])
    }
    #expect(transaction?.serverPrefix == "NOREPLICAS")
    // Each round trip waited twice (1 replica each time), the replicas counted again in between
    // (and before the next round trip, a refusal pointing at a change).
    #expect(fake.waits == Array(repeating: 1, count: 6))
    #expect(fake.replicaCounts - counted == 5)
    #expect(outcomes.current == [.unconfirmed, .unconfirmed, .unconfirmed])
    #expect(redis.isOpen, "a refusal leaves the connection usable")
  }

  @Test(arguments: ReplicaWaitTarget.allCases)
  func aReplicaThatConfirmsOnTheSecondWaitIsLateButStored(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 1, waits: [0, 1])
    defer { fake.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try fake.connect(observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [1, 1])
    #expect(outcomes.current == [.confirmedLate])
    #expect(try redis.get("k") == Array("v".utf8))
    #expect(fake.waits == [1, 1, 1], "a read's round trip ends with WAIT too (answered at once by Redis)")
  }

  @Test(arguments: ReplicaWaitTarget.allCases)
  func theSettingSaysHowManyReplicasCappedAtThoseThereAre(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 2, waits: [])
    defer { fake.stop() }
    for (setting, expected) in [(0, [Int]()), (1, [1]), (2, [2]), (5, [2])] {
      fake.forgetWaits()
      let redis = try fake.connect(replicas: setting)
      defer { redis.close() }
      #expect(try redis.set("k", "v"))
      #expect(fake.waits == expected, "wait-replicas=\(setting)")
    }
  }

  @Test(arguments: ReplicaWaitTarget.allCases)
  func aReplicaAddedLaterIsWaitedForOnceCountedAgain(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 0, waits: [])
    defer { fake.stop() }
    let clock = ManualClock()
    let redis = try fake.connect(clock: clock)
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [], "no replica: nothing to wait for")
    fake.set(replicas: 1)
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [], "not due to be counted again yet")
    clock.advance(by: .seconds(5))
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [1], "counted again, the new replica is waited for")
  }

  @Test(arguments: ReplicaWaitTarget.allCases)
  func aWaitThatCountsAReplicaNotKnownOfHasThemCountedAgain(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 1, waits: [2])
    defer { fake.stop() }
    let redis = try fake.connect(replicas: 2, clock: ManualClock())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [1])
    // Two replicas confirmed where one was counted: the next round trip counts them first.
    fake.set(replicas: 2)
    let counted = fake.replicaCounts
    #expect(try redis.set("k", "w"))
    #expect(fake.replicaCounts > counted)
    #expect(fake.waits == [1, 2])
  }

  @Test(arguments: ReplicaWaitTarget.allCases)
  func aNodesMetricsCountLateAndRefusedRoundTrips(_ target: ReplicaWaitTarget) throws {
    let registry = MetricsRegistry()
    let metrics = ClusterMetrics(registry: registry)
    let fake = try target.fake(replicas: 1, waits: [0, 1, 0, 0])
    defer { fake.stop() }
    let redis = try fake.connect(observer: metrics.replicaObserver())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(throws: RedisError.self) { try redis.set("k", "w") }
    let text = PrometheusTextFormat.render(registry)
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="late"} 1"#), "\(text)")
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="unconfirmed"} 1"#))
  }

  @Test(arguments: [
    ("redis-cluster://127.0.0.1:7000,127.0.0.1:7001?wait-replicas=2&wait-timeout-ms=250", "redis-cluster://h:1"),
    ("rediss://h:1/2?wait-replicas=2&wait-timeout-ms=250", "redis://h:1"),
  ])
  func waitSettingsComeFromTheURL(_ url: String, plain: String) throws {
    let configuration = try RedisConfiguration(url: url)
    #expect((configuration.clusterSeeds != nil) == url.hasPrefix("redis-cluster:"))
    #expect(configuration.replicaWait.replicas == 2)
    #expect(configuration.replicaWait.timeout == .milliseconds(250))
    #expect(try RedisConfiguration(url: plain).replicaWait == .standard)
    #expect(try RedisConfiguration(url: plain + "?wait-replicas=0").replicaWait.replicas == 0)
    for bad in [
      "wait-replicas=-1", "wait-replicas=x", "wait-replicas=17", "wait-timeout-ms=0", "wait-timeout-ms=x", "ca-file=x",
    ] {
      #expect(throws: RedisError.self, "\(plain)?\(bad)") { try RedisConfiguration(url: plain + "?" + bad) }
    }
  }

  /// The replicas go while the first WAIT runs: counted again before a second WAIT, there is
  /// none left to wait for, so the write stands (no replica could take over), and no later
  /// round trip waits.
  @Test(arguments: ReplicaWaitTarget.allCases)
  func aReplicaLostDuringAWaitStopsBeingWaitedFor(_ target: ReplicaWaitTarget) throws {
    let fake = try target.fake(replicas: 1, waits: [0])
    defer { fake.stop() }
    switch target {
    case .cluster: fake.afterWait = { $0.replicaHealth = "fail" }  // marked failed: the map leaves it out
    case .single: fake.afterWait = { $0.replicas = 0 }  // disconnected
    }
    let redis = try fake.connect()
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(fake.waits == [1])
    #expect(try redis.set("k", "w"))
    #expect(fake.waits == [1], "no WAIT without a replica")
  }

  // MARK: - One server only

  @Test func aServerDemotedToAReplicaConfirmsNothing() throws {
    let server = try FakeReplicas(.single, replicas: 1, waits: [0])
    defer { server.stop() }
    server.afterWait = { $0.role = "slave" }
    let redis = try server.connect()
    defer { redis.close() }
    let refused = #expect(throws: RedisError.self) { try redis.set("k", "v") }
    #expect(refused?.serverPrefix == "NOREPLICAS")
    #expect(server.waits == [1], "no second WAIT on a server that is no longer the primary")
  }

  @Test func aServerWithoutReplicasIsNeverWaitedOn() throws {
    for (role, replicas) in [("master", 0), ("slave", 2)] {
      let server = try FakeReplicas(.single, replicas: replicas, waits: [])
      defer { server.stop() }
      server.state.withLock { $0.role = role }
      let redis = try server.connect()
      defer { redis.close() }
      #expect(try redis.set("k", "v"))
      #expect(try redis.pipeline([["SET", "k", "w"], ["GET", "k"]]) == [.status("OK"), .bulk(Array("v".utf8))])
      #expect(server.waits == [], "\(role) with \(replicas) replicas")
    }
    // wait-replicas=0: the replicas are not even counted.
    let server = try FakeReplicas(.single, replicas: 1, waits: [])
    defer { server.stop() }
    let redis = try server.connect(replicas: 0)
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [])
    #expect(server.replicaCounts == 0)
  }

  @Test func aServerThatRefusesInfoIsNotWaitedOn() throws {
    let server = try FakeReplicas(.single, replicas: 1, waits: [])
    defer { server.stop() }
    server.state.withLock { $0.refuseInfo = true }
    let redis = try server.connect()
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [])
  }
}

/// Where a WAIT test runs: a one-shard Redis Cluster, or one server.
enum ReplicaWaitTarget: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case cluster
  case single

  var testDescription: String { rawValue }

  func fake(replicas: Int, waits: [Int64]) throws -> FakeReplicas {
    try FakeReplicas(self, replicas: replicas, waits: waits)
  }
}
