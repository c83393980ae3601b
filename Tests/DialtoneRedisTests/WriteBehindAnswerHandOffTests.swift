import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// Answers to relayed candidates reach the hub from the sender's job that stored their batch
  /// when nothing waits behind that job, and from a job of their own behind whatever does
  /// (`WriteBehindShell.answer`): never before a Redis step queued before them.
  @Suite struct WriteBehindAnswerHandOff {
    final class Hub: ClusterInbox, Sendable {
      let order = Locked<[String]>([])
      let answered = DispatchSemaphore(value: 0)
      func receive(_ event: ClusterEvent) {
        guard case .answersUnstored(let answers) = event else { return }
        order.withLock { $0 += answers.map { "answer \($0.requestID)" } }
        answered.signal()
      }
    }

    /// A held session's shell on a sender of its own, with a candidate copy and the relayed
    /// candidate's answer in one event, and the sender held (`hold`): `body` flushes the event and
    /// lets the sender go on.
    private func withHeldEvent(
      _ body: (WriteBehindShell, RedisWorker, _ gate: DispatchSemaphore, Hub) throws -> Void
    ) throws {
      let session = try ClaimedSession()
      defer { session.close() }
      let sender = try writeBehindSender()
      defer { sender.close() }
      let hub = Hub()
      let claimed = try #require(session.claimed)
      let shell = WriteBehindShell(
        node: session.holder, holder: .init(lease: .seconds(60), margin: .seconds(1)), ledger: session.limits,
        sender: sender, inbox: Locked<(any ClusterInbox)?>(hub), log: Log(level: .error, subsystem: "t"))
      #expect(
        shell.hold(
          session.id, of: Identity(userId: "alice", deviceId: "phone", name: nil), epoch: session.epoch,
          lastSeq: claimed.lastSeq))
      let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"candidate"}"#.utf8))
      shell.add(.init(session: session.id, frame: frame, kind: .candidate, requestID: nil, mayWait: true))
      #expect(
        shell.answerIfHeld(.init(session: session.id, requestID: "r1", bytes: Array(#"{"type":"ack"}"#.utf8))))
      try body(shell, sender, hold(sender), hub)
    }

    /// Holds the sender in a job of its own until the returned gate is signalled (every job
    /// queued before has run): jobs queued meanwhile wait behind it, and the flush that queues the
    /// batch's job has applied its own effects before that job runs (else the answers could be
    /// applied by the flushing thread, which hands them over in a job, rightly).
    private func hold(_ sender: RedisWorker) -> DispatchSemaphore {
      let (gate, held) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
      #expect(
        sender.submit { _ in
          held.signal()
          gate.wait()
        })
      #expect(held.wait(timeout: .now() + 10) == .success)
      return gate
    }

    @Test func answersGoToTheHubFromTheJobThatStoredTheirBatchWhenNothingWaitsBehindIt() throws {
      try withHeldEvent { shell, sender, gate, hub in
        let before = sender.jobsTaken
        shell.flush()
        gate.signal()
        #expect(hub.answered.wait(timeout: .now() + 10) == .success)
        // The batch's job alone: no job of the answers' own behind it.
        #expect(sender.jobsTaken - before == 1)
        #expect(hub.order.current == ["answer r1"])
      }
    }

    @Test func answersWaitBehindAJobQueuedAfterTheirBatchsJob() throws {
      try withHeldEvent { shell, sender, gate, hub in
        // The batch's job queues behind the held sender, and a step behind that.
        shell.flush()
        #expect(sender.submit { _ in hub.order.withLock { $0.append("step") } })
        gate.signal()
        #expect(hub.answered.wait(timeout: .now() + 10) == .success)
        #expect(hub.order.current == ["step", "answer r1"])
      }
    }
  }
}
