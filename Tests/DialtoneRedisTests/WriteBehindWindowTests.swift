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
      let session = try ClaimedSession()
      defer { session.close() }
      let (redis, limits, id, node, epoch) = (
        session.redis, session.limits, session.id, session.holder, session.epoch
      )
      let claimed = try #require(session.claimed)
      let sender = try writeBehindSender()
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
