import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// Admission on the node (`WriteBehindShell.admit`): the shell in virtual time, its batches
  /// stored in a real Redis, letters from another node filling it while an admitted request waits.
  @Suite struct WriteBehindAdmissionOnTheShell {
    final class Hub: ClusterInbox, Sendable {
      let events = Locked<[String]>([])
      func receive(_ event: ClusterEvent) {
        switch event {
        case .sessionsBroken(let ids): events.withLock { $0.append("broken \(ids)") }
        case .requestsRefused(let requests): events.withLock { $0.append("refused \(requests.map(\.requestID))") }
        default: break
        }
      }
    }

    /// A frame of about `size` bytes once numbered.
    func frame(_ n: Int, size: Int = 0) -> SessionLedger.Frame {
      .init(
        head: Array(#"{"seq":"#.utf8),
        tail: Array(#","n":\#(n),"pad":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: size)
          + Array(#"","type":"candidate"}"#.utf8))
    }

    @Test func anAdmittedRequestIsStoredThoughLettersFilledTheNodeAndTheNextIsRefusedUpFront() throws {
      let session = try ClaimedSession()
      defer { session.close() }
      let claimed = try #require(session.claimed)
      let sender = try writeBehindSender()
      defer { sender.close() }
      let hub = Hub()
      let poison = Locked(SessionPoison())
      let clock = Locked(ContinuousClock.now)
      // 10,000 bytes for the node; a request of 100 bytes is kept 2,248. The window is far longer
      // than the test: only the test's clock ends it.
      let shell = WriteBehindShell(
        node: session.holder,
        holder: .init(
          lease: .seconds(600), margin: .seconds(1), maxNodeBytes: 10_000, batchWindow: .seconds(60),
          admissionCopies: 1),
        ledger: session.limits, sender: sender, inbox: Locked<(any ClusterInbox)?>(hub), poison: poison,
        log: Log(level: .error, subsystem: "t"), now: { clock.current })
      defer { shell.stop() }
      #expect(
        shell.hold(
          session.id, of: Identity(userId: "alice", deviceId: "phone", name: nil), epoch: session.epoch,
          lastSeq: claimed.lastSeq))
      // Alice's request (an accept) is admitted before the hub handles it.
      #expect(shell.admit("a1", of: session.id, bytes: 100))
      // Meanwhile another node's relayed candidates for her come (about 3,000 bytes held each):
      // never refused, they fill the node past its bound.
      for n in 1...4 {
        shell.letter(.init(session: session.id, frame: frame(n, size: 1_500), kind: .candidate), position: "\(n)-0")
      }
      // (The reader stops at the bound; the fourth was read before it looked: ~12,000 held.)
      #expect(!shell.acceptsLetters)
      // The hub handled the accept: its answer (and what it caused) is numbered, not refused, and
      // no session resyncs.
      let ack = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","replyTo":"a1","type":"ack"}"#.utf8))
      shell.add(.init(session: session.id, frame: ack, kind: .storeFirst, requestID: "a1"))
      shell.flush()
      #expect(hub.events.current.isEmpty && poison.current.isEmpty)
      // Her next request is refused before it is handled (the hub answers `rate-limited`).
      #expect(!shell.admit("a2", of: session.id, bytes: 100))
      // The store-first answer went at once (its batch is urgent): Redis has it after the four letters.
      let stored = polled(within: 10) {
        guard case .messages(let frames)? = try? session.ledger.range(session.id, after: 0) else { return false }
        return frames.map(\.seq) == [1, 2, 3, 4, 5]
      }
      #expect(stored)
      let idle = polled(within: 10) { shell.admit("a2", of: session.id, bytes: 100) }
      #expect(idle)
      #expect(hub.events.current.isEmpty && poison.current.isEmpty)
    }
  }
}

/// Polls `condition` until it holds or `seconds` pass (a bound, not a timing assertion).
private func polled(within seconds: Double, _ condition: () -> Bool) -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while Date() < deadline {
    if condition() { return true }
    Thread.sleep(forTimeInterval: 0.01)
  }
  return condition()
}
