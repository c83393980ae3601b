import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// The batch window's end is kept by the sender's own thread (`RedisWorker.wake`), not a timer
  /// thread: frames that may wait are stored, and then written, once it passes.
  @Suite struct WriteBehindWindow {
    final class Hub: ClusterInbox, Sendable {
      let written = Locked<[StoredFrame]>([])
      let arrived = DispatchSemaphore(value: 0)
      func receive(_ event: ClusterEvent) {
        guard case .framesStored(let frames) = event else { return }
        written.withLock { $0 += frames }
        arrived.signal()
      }
    }

    @Test func framesThatMayWaitAreStoredAndWrittenWhenTheWindowEndsWithNoTimerThread() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let limits = SessionLedger.Limits(expiry: .seconds(60))
      let (id, node) = ("s_" + UUID().uuidString, "n-" + UUID().uuidString)
      try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(node)
      let epoch = try SessionLedger(redis, limits: limits).open(id, userId: "alice", deviceId: "phone", node: node)
      let claimed = try #require(try WriteBehindStore(redis, limits: limits).claim(id, epoch: epoch))
      // (The suite's server is a task-local: the sender's thread connects to it by name.)
      let server = try SharedRedis.server()
      let sender = RedisWorker(name: "test-sender", maxQueued: 16) { () throws(RedisError) in
        let connection: any RedisClient
        do {
          connection = try server.connect()
        } catch {
          throw .connectionFailed(message: "\(error)")
        }
        try connection.load(SessionLedger.scripts + WriteBehindStore.scripts)
        return connection
      }
      defer { sender.close() }
      let hub = Hub()
      // No periodic tick (`start` is not called): only the window's own wake can cut the batch.
      let shell = WriteBehindShell(
        node: node, holder: .init(lease: .seconds(60), margin: .seconds(1), batchWindow: .milliseconds(20)),
        ledger: limits, sender: sender, inbox: Locked<(any ClusterInbox)?>(hub), log: Log(level: .error, subsystem: "t")
      )
      #expect(
        shell.hold(
          id, of: Identity(userId: "alice", deviceId: "phone", name: nil), epoch: epoch, lastSeq: claimed.lastSeq))
      // An answer that may wait (an ack to a relayed candidate): written only once stored.
      let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ack"}"#.utf8))
      shell.add(.init(session: id, frame: frame, kind: .storeFirst, requestID: "r1", mayWait: true))
      shell.flush()
      #expect(hub.arrived.wait(timeout: .now() + 10) == .success)
      #expect(hub.written.current == [StoredFrame(sessionID: id, seq: 1, bytes: frame.bytes(seq: 1))])
      #expect(
        try SessionLedger(redis, limits: limits).range(id, after: 0)
          == .messages([
            .init(sessionID: id, seq: 1, bytes: frame.bytes(seq: 1))
          ]))
    }
  }
}
