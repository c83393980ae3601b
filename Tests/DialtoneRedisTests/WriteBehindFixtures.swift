import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

/// A session ledger and a write-behind store on one connection to the suite's Redis, with the
/// same limits: what a test of the batch script or of the letters starts from.
struct LedgerAndStore {
  let redis: any RedisClient
  let limits: SessionLedger.Limits
  let ledger: SessionLedger
  let store: WriteBehindStore

  init(_ redis: any RedisClient, limits: SessionLedger.Limits = .init(expiry: .seconds(60))) {
    self.redis = redis
    self.limits = limits
    (ledger, store) = (SessionLedger(redis, limits: limits), WriteBehindStore(redis, limits: limits))
  }

  func close() { redis.close() }
}

/// A write-behind session on the shared Redis: opened for alice's phone and claimed by `holder`
/// (whose heartbeat is fresh unless `holderAlive` is false), with `producer` another node that
/// sends it messages.
struct ClaimedSession {
  let redis: any RedisClient
  let limits: SessionLedger.Limits
  let ledger: SessionLedger
  let store: WriteBehindStore
  let id = "s_" + UUID().uuidString
  let holder = "n-" + UUID().uuidString
  let producer = "n-" + UUID().uuidString
  let epoch: UInt64
  /// What the holder's claim returned.
  let claimed: WriteBehindStore.Claimed?

  init(limits: SessionLedger.Limits = .init(expiry: .seconds(60)), holderAlive: Bool = true) throws {
    let opened = LedgerAndStore(try SharedRedis.client(), limits: limits)
    (redis, self.limits, ledger, store) = (opened.redis, opened.limits, opened.ledger, opened.store)
    if holderAlive { try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder) }
    epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
    claimed = try store.claim(id, epoch: epoch)
  }

  func close() { redis.close() }
}

/// A sender thread (`RedisWorker`) on the suite's shared Redis, with the scripts a write-behind
/// shell runs loaded. (The suite's server is a task-local: the sender's thread connects to it by
/// name.)
func writeBehindSender() throws -> RedisWorker {
  let server = try SharedRedis.server()
  return RedisWorker(name: "test-sender", maxQueued: 16) { () throws(RedisError) in
    let connection: any RedisClient
    do {
      connection = try server.connect()
    } catch {
      throw .connectionFailed(message: "\(error)")
    }
    try connection.load(SessionLedger.scripts + WriteBehindStore.scripts)
    return connection
  }
}

/// The session's client (its user's phone) resuming from `lastSeq` on `node`, a write-behind
/// node (up to 8 seqs ahead of what Redis stored): what the resume took, or nil with `failure`
/// recorded as the test's issue.
func resumed(
  _ ledger: SessionLedger, _ id: String, user: String = "alice", from lastSeq: UInt64, on node: String,
  _ failure: String
) throws -> SessionLedger.HeldResumption? {
  let resumption = try ledger.resumeHolding(
    id, userId: user, deviceId: "phone", from: lastSeq, node: node, allowingAhead: 8)
  guard case .resumed(let taken) = resumption else {
    Issue.record("\(failure): \(resumption)")
    return nil
  }
  return taken
}
