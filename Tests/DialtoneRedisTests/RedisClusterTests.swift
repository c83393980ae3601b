import DialtoneCluster
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// Against a real three-shard Redis Cluster (three primaries, a replica each), one for the suite
/// (its tests use keys of their own and leave every slot where they found it but one empty slot).
@Suite(.scratchRedisCluster) struct RedisClusterTests {
  @Test func commandsAndPipelinesReachTheShardOfTheirKeys() async throws {
    do {
      let cluster = try SharedRedisCluster.cluster()
      let redis = try cluster.connect()
      defer { redis.close() }
      #expect(redis.nodes.count == 3)
      let keys = (0..<60).map { "key-\($0)" }
      // Keys of every shard, in one pipeline: each reply where its command was.
      #expect(Set(keys.compactMap { redis.node(forKey: $0) }).count == 3)
      let set = try redis.pipeline(keys.map { ["SET", .string($0), .string("v-\($0)")] })
      #expect(set.allSatisfy { $0 == .status("OK") })
      let got = try redis.pipeline(keys.map { ["GET", .string($0)] })
      #expect(got.map(\.string) == keys.map { "v-\($0)" })
      // Each key is on the server the map names, and only there.
      for key in keys.prefix(6) {
        guard let node = redis.node(forKey: key) else { throw ScratchProcess.Failure("no node for \(key)") }
        let direct = try cluster.direct(node.port)
        #expect(try direct.get(.string(key)) == Array("v-\(key)".utf8))
        direct.close()
      }
      // A script and a transaction whose keys share a tag; keys of two slots are refused here.
      let script = RedisScript("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[2])")
      try redis.set("{t}b", "two")
      #expect(try redis.eval(script, keys: ["{t}a", "{t}b"], arguments: ["one"]).string == "two")
      #expect(try redis.transaction([["INCR", "{t}n"], ["INCR", "{t}n"]]) == [.integer(1), .integer(2)])
      let crossSlot = #expect(throws: RedisError.self) { try redis.transaction([["INCR", "a"], ["INCR", "b"]]) }
      #expect("\(String(describing: crossSlot))".contains("CROSSSLOT"))
      let crossCommand = try redis.pipeline([["DEL", "a", "b"], ["PING"]])
      #expect(crossCommand[0] == .error(prefix: "CROSSSLOT", message: crossCommand[0].errorMessage ?? ""))
      #expect(crossCommand[1] == .status("PONG"))
      // Loaded scripts run by SHA on every shard, in a pipeline.
      try redis.load([script])
      let sha = try redis.pipeline(
        keys.prefix(9).map {
          RedisConnection.evalsha(script, keys: [.string("{\($0)}x"), .string($0)], arguments: ["1"])
        })
      #expect(sha.map(\.string) == keys.prefix(9).map { "v-\($0)" })
    }
  }

  @Test func aMigratingSlotIsFollowedByAskThenByMoved() async throws {
    do {
      let cluster = try SharedRedisCluster.cluster()
      let redis = try cluster.connect()
      defer { redis.close() }
      let key = "migrating-key"
      let slot = RedisSlot.of(key)
      guard let source = redis.node(forKey: key), let target = redis.nodes.first(where: { $0 != source }) else {
        throw ScratchProcess.Failure("no two primaries")
      }
      let from = try cluster.direct(source.port)
      let to = try cluster.direct(target.port)
      defer {
        from.close()
        to.close()
      }
      guard let sourceID = try from.command(["CLUSTER", "MYID"]).string,
        let targetID = try to.command(["CLUSTER", "MYID"]).string
      else { throw ScratchProcess.Failure("no node ids") }
      try to.command(["CLUSTER", "SETSLOT", .integer(Int64(slot)), "IMPORTING", .string(sourceID)])
      try from.command(["CLUSTER", "SETSLOT", .integer(Int64(slot)), "MIGRATING", .string(targetID)])

      // The source no longer has the key: it answers ASK, and the write lands on the target.
      try redis.set(.string(key), "moved along")
      #expect(
        try from.pipeline([["EXISTS", .string(key)]])[0].movedTarget?.address == target, "the source sends it on")
      #expect(try to.pipeline([["ASKING"], ["GET", .string(key)]])[1].string == "moved along")
      #expect(try redis.get(.string(key)) == Array("moved along".utf8))
      #expect(redis.node(forKey: key) == source, "ASK leaves the map alone")

      // The migration ends: the source answers MOVED, and the map learns the slot's new home.
      try to.command(["CLUSTER", "SETSLOT", .integer(Int64(slot)), "NODE", .string(targetID)])
      try from.command(["CLUSTER", "SETSLOT", .integer(Int64(slot)), "NODE", .string(targetID)])
      #expect(try from.pipeline([["GET", .string(key)]])[0].movedTarget?.address == target)
      #expect(try redis.get(.string(key)) == Array("moved along".utf8))
      #expect(try redis.pipeline([["GET", .string(key)], ["PING"]])[0].string == "moved along")
      // The map was read again from the slot's new home, which knows it for certain.
      #expect(redis.node(forKey: key) == target)
    }
  }

  @Test func everyWriteToAPrimaryWithAReplicaWaitsForIt() throws {
    let cluster = try SharedRedisCluster.cluster()
    let redis = try cluster.connect()
    defer { redis.close() }
    _ = try redis.pipeline((0..<30).map { ["SET", .string("waited-\($0)"), "v"] })
    for node in redis.nodes {
      let direct = try cluster.direct(node.port)
      defer { direct.close() }
      let stats = try direct.command(["INFO", "commandstats"]).string ?? ""
      #expect(stats.contains("cmdstat_wait:"), "no WAIT reached \(node)")
    }
  }
}

/// A cluster of its own for each test: they kill or stall a server.
@Suite struct RedisClusterFailoverTests {
  @Test func aKilledPrimaryIsReplacedByItsReplicaWithItsWrites() async throws {
    try await ScratchRedisCluster.with { cluster in
      let redis = try cluster.connect(commandTimeout: .seconds(2))
      defer { redis.close() }
      let keys = (0..<30).map { "kept-\($0)" }
      // Acknowledged only once a replica confirmed them (a replica slow under load: NOREPLICAS,
      // and the idempotent writes go again, as a caller would). Nothing else is waited for
      // before the kill: what was acknowledged is on the replica.
      _ = try acknowledged { try stored(redis.pipeline(keys.map { ["SET", .string($0), "before"] })) }
      guard let victim = redis.node(forKey: keys[0]) else { throw ScratchProcess.Failure("no node") }
      let onVictim = keys.filter { redis.node(forKey: $0) == victim }

      await cluster.kill(port: victim.port)

      // The connection to the dead primary breaks (a command in flight may have run: thrown);
      // the next commands wait out the failover and reach the promoted replica, which has
      // every write acknowledged before.
      _ = try? redis.get(.string(keys[0]))
      #expect(try acknowledged { try redis.set(.string(keys[0]), "after") })
      #expect(redis.node(forKey: keys[0]) != victim)
      let values = try redis.pipeline(onVictim.map { ["GET", .string($0)] }).map(\.string)
      #expect(values == ["after"] + Array(repeating: "before", count: onVictim.count - 1))
      #expect(try redis.pipeline(keys.map { ["EXISTS", .string($0)] }).allSatisfy { $0 == .integer(1) })
    }
  }

  @Test func aWriteNoReplicaConfirmedIsNotAcknowledgedUntilItCatchesUp() async throws {
    // A node timeout far longer than the test: the stalled replica is never marked failed (a
    // failed replica is no longer waited for).
    try await ScratchRedisCluster.with(nodeTimeout: .seconds(60)) { cluster in
      var configuration = try RedisConfiguration(url: cluster.url)
      let refusals = configuration.countingRefusals()
      let redis = try RedisClusterConnection(configuration)
      defer { redis.close() }
      let key = "stalled-replica"
      guard let primary = redis.node(forKey: key), let replica = try cluster.replicaPorts(of: primary.port).first
      else { throw ScratchProcess.Failure("no primary with a replica") }
      let writes: [(String, () throws(RedisError) -> Void)] = [
        ("a command", { () throws(RedisError) in try redis.set(.string(key), "v") }),
        (
          "a pipeline",
          { () throws(RedisError) in _ = try stored(redis.pipeline([["SET", .string(key), "w"]])) }
        ),
        (
          "a transaction",
          { () throws(RedisError) in _ = try redis.transaction([["SET", .string(key), "x"], ["GET", .string(key)]]) }
        ),
      ]
      for (name, write) in writes {
        await cluster.pause(port: replica)
        let outcome = Result { () throws(RedisError) in try write() }
        await cluster.resume(port: replica)
        guard case .failure(let error) = outcome else {
          Issue.record("\(name) that no replica had was acknowledged")
          continue
        }
        #expect(error.serverPrefix == "NOREPLICAS", "\(name): \(error)")
      }
      #expect(refusals.current == 3)
      // The replica running again catches up: writes are acknowledged again, and it has them.
      #expect(try acknowledged { try redis.set(.string(key), "y") })
      let direct = try cluster.direct(replica)
      defer { direct.close() }
      #expect(try direct.pipeline([["READONLY"], ["GET", .string(key)]])[1].string == "y")
    }
  }
}

/// The session ledger on a shard whose replica stalls: a message is not stored (its session
/// will resync) rather than handed out with a seq a failover could give another message.
@Suite struct SessionLedgerReplicaTests {
  @Test func aMessageNoReplicaConfirmedIsNotStoredAndIsOnceTheReplicaCatchesUp() async throws {
    try await ScratchRedisCluster.with(nodeTimeout: .seconds(60)) { cluster in
      let redis = try cluster.connect()
      defer { redis.close() }
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let (session, node) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString)
      try ledger.open(session, userId: "alice", deviceId: "phone", node: node)
      guard let primary = redis.node(forKey: "{\(session)}"),
        let replica = try cluster.replicaPorts(of: primary.port).first
      else { throw ScratchProcess.Failure("no replica for the session's shard") }
      try await expectRefusedThenStored(
        ledger, session: session, node: node, whilePaused: { await cluster.pause(port: replica) },
        resume: { await cluster.resume(port: replica) })
    }
  }
}

/// A pipeline's replies, its first error reply thrown (NOREPLICAS: that shard's replicas did
/// not confirm its writes).
private func stored(_ replies: [RedisReply]) throws(RedisError) -> [RedisReply] {
  for case .error(let prefix, let message) in replies { throw .server(prefix: prefix, message: message) }
  return replies
}

/// Runs an idempotent write again while too few replicas confirm it in time (NOREPLICAS: it ran
/// on the primary, unconfirmed), up to 20 times: what a caller of a cluster (or of one server
/// with replicas) does.
func acknowledged<T>(_ write: () throws -> T) throws -> T {
  var attempt = 1
  while true {
    do {
      return try write()
    } catch let error as RedisError where error.serverPrefix == "NOREPLICAS" && attempt < 20 {
      attempt += 1
    }
  }
}

/// A cluster that speaks only TLS (clients, replication, bus) and requires a password.
@Suite struct RedisClusterSecurityTests {
  @Test func aClusterBehindTLSAndAPasswordRoutesAsAPlainOne() async throws {
    let certificates = try ScratchCertificates()
    defer { certificates.remove() }
    try await ScratchRedisCluster.with(tls: certificates, password: "clustersecret") { cluster in
      let redis = try cluster.connect()
      defer { redis.close() }
      #expect(redis.nodes.count == 3)
      let keys = (0..<30).map { "secure-\($0)" }
      #expect(try redis.pipeline(keys.map { ["SET", .string($0), "v"] }).allSatisfy { $0 == .status("OK") })
      #expect(try redis.pipeline(keys.map { ["GET", .string($0)] }).allSatisfy { $0.string == "v" })
      for node in redis.nodes {
        let direct = try cluster.direct(node.port)
        defer { direct.close() }
        #expect(try direct.command(["INFO", "commandstats"]).string?.contains("cmdstat_wait:") == true)
        // Replication runs over TLS with the password: the replica confirms a write at once.
        guard let key = keys.first(where: { redis.node(forKey: $0) == node }) else { continue }
        let waited = try direct.pipeline([["SET", .string(key), "w"], ["WAIT", "1", "5000"]])
        let replication = try direct.command(["INFO", "replication"]).string ?? ""
        #expect(waited.last == .integer(1), "\(node): \(replication)\n\(cluster.logs.suffix(3000))")
      }
      // Without the password, or without the CA, nothing routes.
      let open = cluster.url.replacingOccurrences(of: ":clustersecret@", with: "")
      #expect(throws: RedisError.self) { try RedisClusterConnection(RedisConfiguration(url: open)) }
      let unverified = cluster.url.replacingOccurrences(
        of: "ca-file=\(certificates.ca)", with: "ca-file=\(certificates.otherCA)")
      #expect(throws: RedisError.self) { try RedisClusterConnection(RedisConfiguration(url: unverified)) }
    }
  }
}

extension RedisReply {
  fileprivate var errorMessage: String? {
    if case .error(_, let message) = self { return message }
    return nil
  }
}

/// A message appended to a session while its replica is paused is refused (NOREPLICAS), not
/// counted as stored; one appended once the replica runs again is stored, after the refused one
/// (which did run on the primary: the session's holder makes its client resync).
func expectRefusedThenStored(
  _ ledger: SessionLedger, session: String, node: String,
  whilePaused pause: () async throws -> Void, resume: () async throws -> Void
) async throws {
  let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ice"}"#.utf8))
  let step = SessionLedger.Step.append(frame, session: session, requestID: nil, once: nil)
  try await pause()
  let refused = Result { () throws(RedisError) in try ledger.run([step], from: node) }
  try await resume()
  switch refused {
  case .success(let results):
    #expect(results.count == 1)
    guard case .failed(let error) = results.first else {
      Issue.record("a message no replica had counts as stored: \(results)")
      return
    }
    #expect(error.serverPrefix == "NOREPLICAS", "\(error)")
  case .failure(let error):
    #expect(error.serverPrefix == "NOREPLICAS", "\(error)")
  }
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

extension RedisConfiguration {
  /// Counts the round trips whose writes too few replicas confirmed (refused with NOREPLICAS).
  mutating func countingRefusals() -> Locked<Int> {
    let refusals = Locked(0)
    replicaWait.observer = RedisReplicaObserver { outcome in
      if outcome == .unconfirmed { refusals.withLock { $0 += 1 } }
    }
    return refusals
  }
}
