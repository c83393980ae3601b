import DialtoneCluster
import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// Against a real primary and its replica (scratch redis-servers, as Sentinel or a managed
/// service would run them): writes the stalled (SIGSTOPped) replica does not have are refused
/// rather than counted as stored, and stored again once it runs.
@Suite struct RedisSingleReplicaTests {
  @Test func aWriteTheStalledReplicaLacksIsRefusedAndStoredOnceItRuns() async throws {
    try await withReplicatedRedis { primary, replica in
      var configuration = try RedisConfiguration(url: primary.url)
      let refusals = configuration.countingRefusals()
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
      _ = try acknowledged { try ledger.open(session, userId: "alice", deviceId: "phone", node: node) }
      try await expectRefusedThenStored(
        ledger, session: session, node: node, whilePaused: { await replica.pause() }, resume: { await replica.resume() }
      )
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
    try await ScratchRedis.with(replicaOf: primary) { replica in
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
