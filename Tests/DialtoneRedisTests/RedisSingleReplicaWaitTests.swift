import DialtoneCluster
import DialtoneMetrics
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// `RedisConnection`'s WAIT (one server, not a cluster) against a fake server whose replies the
/// test scripts: how many replicas `INFO replication` reports, what each WAIT answers.
@Suite struct RedisSingleReplicaWaitTests {
  @Test func aWriteTooFewReplicasConfirmedIsRefusedAfterASecondWait() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [0, 0, 0, 0, 0, 0])
    defer { server.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try server.connect(
      observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }
    let counted = server.infoReads

    let single = #expect(throws: RedisError.self) { try redis.set("k", "v") }
    #expect(single?.serverPrefix == "NOREPLICAS")
    // A pipeline answers the refusal for each of its commands.
    let replies = try redis.pipeline([["SET", "k", "w"], ["GET", "k"]])
    #expect(replies.count == 2)
    #expect(replies.allSatisfy { if case .error("NOREPLICAS", _) = $0 { true } else { false } })
    let transaction = #expect(throws: RedisError.self) {
      try redis.transaction([["SET", "a", "1"], ["SET", "b", "2"]])
    }
    #expect(transaction?.serverPrefix == "NOREPLICAS")
    // Each round trip waited twice (1 replica each time), the replicas counted again in between
    // (and before the next round trip, a refusal pointing at a change).
    #expect(server.waits == Array(repeating: 1, count: 6))
    #expect(server.infoReads - counted == 5)
    #expect(outcomes.current == [.unconfirmed, .unconfirmed, .unconfirmed])
    #expect(redis.isOpen, "a refusal leaves the connection usable")
  }

  @Test func aReplicaThatConfirmsOnTheSecondWaitIsLateButStored() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [0, 1])
    defer { server.stop() }
    let outcomes = Locked<[RedisReplicaObserver.Outcome]>([])
    let redis = try server.connect(
      observer: RedisReplicaObserver { outcome in outcomes.withLock { $0.append(outcome) } })
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [1, 1])
    #expect(outcomes.current == [.confirmedLate])
    #expect(try redis.get("k") == Array("v".utf8))
    #expect(server.waits == [1, 1, 1], "a read's round trip ends with WAIT too (answered at once by Redis)")
  }

  @Test func aReplicaThatDisconnectedStopsBeingWaitedFor() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [0])
    defer { server.stop() }
    // The replica drops off while the first WAIT runs: counted again before a second WAIT, the
    // server has none left to wait for, so the write stands (no replica could take over).
    server.afterWait = { $0.replicas = 0 }
    let redis = try server.connect()
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [1])
    #expect(try redis.set("k", "w"))
    #expect(server.waits == [1], "no WAIT for a server without replicas")
  }

  @Test func aServerDemotedToAReplicaConfirmsNothing() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [0])
    defer { server.stop() }
    server.afterWait = { $0.role = "slave" }
    let redis = try server.connect()
    defer { redis.close() }
    let refused = #expect(throws: RedisError.self) { try redis.set("k", "v") }
    #expect(refused?.serverPrefix == "NOREPLICAS")
    #expect(server.waits == [1], "no second WAIT on a server that is no longer the primary")
  }

  @Test func theSettingSaysHowManyReplicasCappedAtThoseTheServerHas() throws {
    let server = try FakeReplicatedServer(replicas: 2, waits: [])
    defer { server.stop() }
    for (setting, expected) in [(0, [Int]()), (1, [1]), (2, [2]), (5, [2])] {
      server.state.withLock { $0.waits = [] }
      let redis = try server.connect(replicas: setting)
      defer { redis.close() }
      #expect(try redis.set("k", "v"))
      #expect(server.waits == expected, "wait-replicas=\(setting)")
    }
  }

  @Test func aServerWithoutReplicasIsNeverWaitedOn() throws {
    for (role, replicas) in [("master", 0), ("slave", 2)] {
      let server = try FakeReplicatedServer(replicas: replicas, waits: [])
      defer { server.stop() }
      server.state.withLock { $0.role = role }
      let redis = try server.connect()
      defer { redis.close() }
      #expect(try redis.set("k", "v"))
      #expect(try redis.pipeline([["SET", "k", "w"], ["GET", "k"]]) == [.status("OK"), .bulk(Array("v".utf8))])
      #expect(server.waits == [], "\(role) with \(replicas) replicas")
    }
    // wait-replicas=0: the replicas are not even counted.
    let server = try FakeReplicatedServer(replicas: 1, waits: [])
    defer { server.stop() }
    let redis = try server.connect(replicas: 0)
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [])
    #expect(server.infoReads == 0)
  }

  @Test func aServerThatRefusesInfoIsNotWaitedOn() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [])
    defer { server.stop() }
    server.state.withLock { $0.refuseInfo = true }
    let redis = try server.connect()
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [])
  }

  @Test func aReplicaAddedLaterIsWaitedForOnceCountedAgain() throws {
    let server = try FakeReplicatedServer(replicas: 0, waits: [])
    defer { server.stop() }
    let clock = ManualClock()
    let redis = try server.connect(clock: clock)
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [], "no replica: nothing to wait for")
    server.state.withLock { $0.replicas = 1 }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [], "not due to be counted again yet")
    clock.advance(by: .seconds(5))
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [1], "counted again, the new replica is waited for")
  }

  @Test func aWaitThatCountsAReplicaNotKnownOfHasThemCountedAgain() throws {
    let server = try FakeReplicatedServer(replicas: 1, waits: [2])
    defer { server.stop() }
    let redis = try server.connect(replicas: 2, clock: ManualClock())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(server.waits == [1])
    // Two replicas confirmed while INFO said one: the next round trip counts them first.
    server.state.withLock { $0.replicas = 2 }
    let counted = server.infoReads
    #expect(try redis.set("k", "w"))
    #expect(server.infoReads == counted + 1)
    #expect(server.waits == [1, 2])
  }

  @Test func aNodesMetricsCountLateAndRefusedRoundTripsOnOneServer() throws {
    let registry = MetricsRegistry()
    let metrics = ClusterMetrics(registry: registry)
    let server = try FakeReplicatedServer(replicas: 1, waits: [0, 1, 0, 0])
    defer { server.stop() }
    let redis = try server.connect(observer: metrics.replicaObserver())
    defer { redis.close() }
    #expect(try redis.set("k", "v"))
    #expect(throws: RedisError.self) { try redis.set("k", "w") }
    let text = PrometheusTextFormat.render(registry)
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="late"} 1"#), "\(text)")
    #expect(text.contains(#"dialtone_cluster_redis_replica_waits_total{outcome="unconfirmed"} 1"#))
  }

  @Test func waitSettingsComeFromTheURLOfOneServer() throws {
    let configuration = try RedisConfiguration(url: "rediss://h:1/2?wait-replicas=2&wait-timeout-ms=250")
    #expect(configuration.clusterSeeds == nil)
    #expect(configuration.replicaWait.replicas == 2)
    #expect(configuration.replicaWait.timeout == .milliseconds(250))
    #expect(try RedisConfiguration(url: "redis://h:1").replicaWait == .standard)
    #expect(try RedisConfiguration(url: "redis://h:1?wait-replicas=0").replicaWait.replicas == 0)
    for bad in ["redis://h:1?wait-replicas=17", "redis://h:1?wait-timeout-ms=x", "redis://h:1?ca-file=x"] {
      #expect(throws: RedisError.self, "\(bad)") { try RedisConfiguration(url: bad) }
    }
  }
}

/// One server with `replicas` replicas in its `INFO replication`; each WAIT answers the next of
/// `script` (all the replicas asked for once it runs out) and is logged.
private final class FakeReplicatedServer: Sendable {
  struct State {
    var replicas: Int
    var role = "master"
    var refuseInfo = false
    var script: [Int64]
    var waits: [Int] = []
    var infoReads = 0
  }
  typealias Hook = @Sendable (inout State) -> Void
  let state: Locked<State>
  private let hook: Locked<Hook?>
  private let server: FakeRedisServer

  /// Runs after each WAIT is answered (a change on the server meanwhile).
  var afterWait: Hook? {
    get { hook.current }
    set { hook.withLock { $0 = newValue } }
  }
  var waits: [Int] { state.current.waits }
  var infoReads: Int { state.current.infoReads }

  init(replicas: Int, waits: [Int64]) throws {
    let state = Locked(State(replicas: replicas, script: waits))
    let hook = Locked<Hook?>(nil)
    self.state = state
    self.hook = hook
    server = try FakeRedisServer { command in Self.answer(command, state, hook) }
  }

  func stop() { server.stop() }

  func connect(
    replicas: Int = 1, clock: any DialtoneClock = SystemClock(), observer: RedisReplicaObserver? = nil
  ) throws -> RedisConnection {
    var configuration = try RedisConfiguration(url: "redis://127.0.0.1:\(server.port)")
    configuration.replicaWait = RedisReplicaWait(
      replicas: replicas, timeout: .milliseconds(10), attempts: 2, observer: observer)
    return try RedisConnection(configuration, clock: clock)
  }

  private static func answer(_ command: [String], _ state: Locked<State>, _ hook: Locked<Hook?>) -> RedisReply {
    let name = command.first?.uppercased() ?? ""
    let argument = command.dropFirst().first ?? ""
    switch name {
    case "INFO":
      let now = state.withLock { state in
        state.infoReads += 1
        return state
      }
      if now.refuseInfo { return .error(prefix: "NOPERM", message: "this user has no permissions to run 'info'") }
      let replicas = (0..<now.replicas).map {
        "slave\($0):ip=127.0.0.1,port=\(7001 + $0),state=online,offset=1,lag=0\r\n"
      }
      let info = "# Replication\r\nrole:\(now.role)\r\nconnected_slaves:\(now.replicas)\r\n" + replicas.joined()
      return .bulk(Array(info.utf8))
    case "WAIT":
      let asked = Int(argument) ?? -1
      let after = hook.current
      return state.withLock { state in
        state.waits.append(asked)
        let answer = state.script.isEmpty ? Int64(asked) : state.script.removeFirst()
        after?(&state)
        return .integer(answer)
      }
    case "GET": return .bulk(Array("v".utf8))
    case "EXEC": return .array([.status("OK"), .status("OK")])
    default: return .status("OK")
    }
  }
}

/// Against a real primary and its replica (scratch redis-servers, as Sentinel or a managed
/// service would run them): writes the stalled (SIGSTOPped) replica does not have are refused
/// rather than counted as stored, and stored again once it runs.
@Suite struct RedisSingleReplicaTests {
  @Test func aWriteTheStalledReplicaLacksIsRefusedAndStoredOnceItRuns() async throws {
    try await withReplicatedRedis { primary, replica in
      let refusals = Locked(0)
      var configuration = try RedisConfiguration(url: primary.url)
      configuration.replicaWait.observer = RedisReplicaObserver { outcome in
        if outcome == .unconfirmed { refusals.withLock { $0 += 1 } }
      }
      let redis = try RedisConnection(configuration)
      defer { redis.close() }
      let key: RedisArgument = "stalled-replica"
      let writes: [(String, () throws(RedisError) -> Void)] = [
        ("a command", { () throws(RedisError) in try redis.set(key, "v") }),
        ("a pipeline", { () throws(RedisError) in _ = try redis.pipeline([["SET", key, "w"]]).throwingFirstError() }),
        ("a transaction", { () throws(RedisError) in _ = try redis.transaction([["SET", key, "x"], ["GET", key]]) }),
      ]
      for (name, write) in writes {
        await replica.pause()
        let outcome = Result { () throws(RedisError) in try write() }
        await replica.resume()
        guard case .failure(let error) = outcome else {
          Issue.record("\(name) the replica did not have was acknowledged")
          continue
        }
        #expect(error.serverPrefix == "NOREPLICAS", "\(name): \(error)")
      }
      #expect(refusals.current == 3)
      #expect(redis.isOpen)
      // The replica running again catches up: writes are acknowledged again, and it has them.
      #expect(try acknowledged { try redis.set(key, "y") })
      let direct = try replica.connect()
      defer { direct.close() }
      #expect(try direct.get(key) == Array("y".utf8))
    }
  }

  @Test func theSessionLedgerDoesNotStoreAMessageNoReplicaConfirmed() async throws {
    try await withReplicatedRedis { primary, replica in
      let redis = try primary.connect()
      defer { redis.close() }
      try redis.load(SessionLedger.scripts)
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let (session, node) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString)
      try acknowledged { try ledger.open(session, userId: "alice", deviceId: "phone", node: node) }
      let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ice"}"#.utf8))
      let step = SessionLedger.Step.append(frame, session: session, requestID: nil, once: nil)

      await replica.pause()
      let refused = Result { () throws(RedisError) in try ledger.run([step], from: node) }
      await replica.resume()
      switch refused {
      case .success(let results):
        guard case .failed(let error) = results.first else {
          Issue.record("a message no replica had counts as stored: \(results)")
          return
        }
        #expect(error.serverPrefix == "NOREPLICAS", "\(error)")
      case .failure(let error):
        #expect(error.serverPrefix == "NOREPLICAS", "\(error)")
      }

      // Once the replica runs again, a message is stored (after the refused one, which did run
      // on the primary: the session's holder makes its client resync).
      let stored = try acknowledged { () throws -> SessionLedger.StepResult in
        let results = try ledger.run([step], from: node)
        if case .failed(let error)? = results.first { throw error }
        return results.first ?? .failed(.unexpectedReply(.null))
      }
      guard case .appended(.here(let message)) = stored else {
        Issue.record("not stored for its holder: \(stored)")
        return
      }
      #expect(message.seq == 2)
    }
  }
}

/// A primary and one replica that confirms writes (a probe write WAITed for: "state=online" is
/// not enough, as the replica acknowledges nothing until its first REPLCONF ACK), both stopped
/// afterwards.
private func withReplicatedRedis(
  isolation: isolated (any Actor)? = #isolation, _ body: (ScratchRedis, ScratchRedis) async throws -> Void
) async throws {
  try await ScratchRedis.with { primary in
    try await stopping(try await ScratchRedis.start(replicaOf: primary), stop: { await $0.stop() }) { replica in
      let probe = try RedisConnection(url: primary.url + "?wait-replicas=0")
      defer { probe.close() }
      let confirming = await eventually(within: 20) {
        let replies = try? probe.pipeline([["SET", "probe", "1"], ["WAIT", "1", "100"]])
        return replies?.last == .integer(1)
      }
      guard confirming else {
        throw ScratchProcess.Failure("the replica never confirmed a write: \(replica.log.suffix(1000))")
      }
      try await body(primary, replica)
    }
  }
}
