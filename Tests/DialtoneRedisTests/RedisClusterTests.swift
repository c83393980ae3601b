import DialtoneRedis
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

/// A cluster of its own: this test kills a primary.
@Suite struct RedisClusterFailoverTests {
  @Test func aKilledPrimaryIsReplacedByItsReplicaWithItsWrites() async throws {
    try await ScratchRedisCluster.with { cluster in
      let redis = try cluster.connect(commandTimeout: .seconds(2))
      defer { redis.close() }
      let keys = (0..<30).map { "kept-\($0)" }
      _ = try redis.pipeline(keys.map { ["SET", .string($0), "before"] })
      guard let victim = redis.node(forKey: keys[0]) else { throw ScratchProcess.Failure("no node") }
      let onVictim = keys.filter { redis.node(forKey: $0) == victim }
      // WAIT 1 500 gives up after 500 ms and the write counts as stored anyway (docs/deploy.md,
      // Failover): only what the replica has survives. Under load it may lag past that, so the
      // kill waits until the replica has acknowledged everything its primary sent.
      #expect(await eventually(within: 10) { cluster.replicasCaughtUp(port: victim.port) })

      await cluster.kill(port: victim.port)

      // The connection to the dead primary breaks (a command in flight may have run: thrown);
      // the next commands wait out the failover and reach the promoted replica, which has
      // every write it acknowledged.
      _ = try? redis.get(.string(keys[0]))
      #expect(try redis.set(.string(keys[0]), "after"))
      #expect(redis.node(forKey: keys[0]) != victim)
      let values = try redis.pipeline(onVictim.map { ["GET", .string($0)] }).map(\.string)
      #expect(values == ["after"] + Array(repeating: "before", count: onVictim.count - 1))
      #expect(try redis.pipeline(keys.map { ["EXISTS", .string($0)] }).allSatisfy { $0 == .integer(1) })
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
