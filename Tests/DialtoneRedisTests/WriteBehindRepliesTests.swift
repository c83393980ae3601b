import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneSessions
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// A forwarded request's answer, as the call's node gives it (`ClusterLink.reply`), waits for
  /// the shell's batch of what the request caused for the sessions held here: the shell in
  /// virtual time (its window and lease pass only when the test says), its batches stored in a
  /// real Redis.
  @Suite struct WriteBehindForwardedReplies {
    final class Hub: ClusterInbox, Sendable {
      let dropped = Locked<[RefusedRequest]>([])
      func receive(_ event: ClusterEvent) {
        guard case .forwardedDropped(let requests) = event else { return }
        dropped.withLock { $0 += requests }
      }
    }

    /// A shell holding Alice's session; its clock moves only with `clock`.
    struct Rig {
      let redis: any RedisClient
      let sender: RedisWorker
      let shell: WriteBehindShell
      let hub: Hub
      let clock: Locked<ContinuousClock.Instant>
      let session: String
      let limits: SessionLedger.Limits
      /// Answers the shell reported dropped over `maxWaitingReplies` (`/metrics`).
      let overBound: Locked<Int>

      func advance(by duration: Duration) {
        clock.withLock { $0 += duration }
        shell.tick()
      }

      /// The frames Redis has for Alice's session.
      func stored() throws -> [UInt64] {
        guard case .messages(let frames) = try SessionLedger(redis, limits: limits).range(session, after: 0) else {
          return []
        }
        return frames.map(\.seq)
      }

      func close() {
        shell.stop()
        sender.close()
        redis.close()
      }
    }

    func rig(maxWaitingReplies: Int = 1 << 16) throws -> Rig {
      let session = try ClaimedSession()
      let (redis, limits, id, node, epoch) = (
        session.redis, session.limits, session.id, session.holder, session.epoch
      )
      let claimed = try #require(session.claimed)
      let sender = try writeBehindSender()
      let hub = Hub()
      let clock = Locked(ContinuousClock.now)
      let overBound = Locked(0)
      // A window far longer than the test: only `advance` ends it (its real-time wake finds the
      // virtual clock short of it).
      let shell = WriteBehindShell(
        node: node,
        holder: .init(
          lease: .seconds(600), margin: .seconds(1), batchWindow: .seconds(60), maxWaitingReplies: maxWaitingReplies),
        ledger: limits, sender: sender, inbox: Locked<(any ClusterInbox)?>(hub),
        log: Log(level: .error, subsystem: "t"),
        now: { clock.current }, onAnswersOverBound: { count in overBound.withLock { $0 += count } })
      #expect(
        shell.hold(
          id, of: Identity(userId: "alice", deviceId: "phone", name: nil), epoch: epoch, lastSeq: claimed.lastSeq))
      return Rig(
        redis: redis, sender: sender, shell: shell, hub: hub, clock: clock, session: id, limits: limits,
        overBound: overBound)
    }

    /// The copy of Bob's relayed candidate for Alice (held here): written at once, stored after.
    func copy(_ rig: Rig, _ n: Int) -> WriteBehindHolder.Outgoing {
      let frame = SessionLedger.Frame(
        head: Array(#"{"seq":"#.utf8), tail: Array(#","n":\#(n),"type":"candidate"}"#.utf8))
      return .init(session: rig.session, frame: frame, kind: .candidate)
    }

    /// Bob's answers, recording what Redis had of Alice's session when they went.
    final class Answers: Sendable {
      let sent = Locked<[(String, [UInt64])]>([])
      let arrived = DispatchSemaphore(value: 0)

      func replies(_ id: String, _ rig: Rig) -> WriteBehindShell.ForwardedReplies { replies([id], rig) }

      /// One event's answers to several of Bob's requests.
      func replies(_ ids: [String], _ rig: Rig) -> WriteBehindShell.ForwardedReplies {
        .init(requests: ids.map { RefusedRequest(sessionID: "bob-session", requestID: $0) }) { [self] in
          let stored = (try? rig.stored()) ?? []
          sent.withLock { $0 += ids.map { ($0, stored) } }
          arrived.signal()
        }
      }

      var ids: [String] { sent.current.map(\.0) }
    }

    @Test func anAnswerWaitsForItsEventsBatchAndGoesOnceRedisHasIt() throws {
      let rig = try rig()
      defer { rig.close() }
      let answers = Answers()
      rig.shell.add(copy(rig, 1))
      #expect(rig.shell.defersReplies(to: [RefusedRequest(sessionID: "bob-session", requestID: "r1")]))
      rig.shell.flush(replies: answers.replies("r1", rig))
      // The window has not passed: nothing stored, the answer waits.
      #expect(answers.arrived.wait(timeout: .now() + 0.3) == .timedOut)
      #expect(try rig.stored() == [])
      rig.advance(by: .seconds(61))
      #expect(answers.arrived.wait(timeout: .now() + 10) == .success)
      // It went once Redis had Alice's copy.
      #expect(answers.sent.current.map(\.1) == [[1]])
    }

    @Test func anAnswerWithNothingHereGoesAtOnceUnlessAnEarlierOneToItsRequesterWaits() throws {
      let rig = try rig()
      defer { rig.close() }
      let answers = Answers()
      // Nothing caused here, nothing waiting: at once (the link stores it with the event's steps).
      #expect(!rig.shell.defersReplies(to: [RefusedRequest(sessionID: "bob-session", requestID: "r0")]))
      rig.shell.flush(replies: answers.replies("r0", rig))
      #expect(answers.ids == ["r0"] && answers.arrived.wait(timeout: .now()) == .success)
      // An answer waiting for its batch holds back the next one to the same requester.
      rig.shell.add(copy(rig, 1))
      rig.shell.flush(replies: answers.replies("r1", rig))
      #expect(rig.shell.defersReplies(to: [RefusedRequest(sessionID: "bob-session", requestID: "r2")]))
      rig.shell.flush(replies: answers.replies("r2", rig))
      #expect(answers.ids == ["r0"])
      rig.advance(by: .seconds(61))
      for _ in 0..<2 { #expect(answers.arrived.wait(timeout: .now() + 10) == .success) }
      #expect(answers.ids == ["r0", "r1", "r2"])
    }

    /// Answers whose events caused nothing here wait behind an earlier answer to their requester
    /// and are held by no byte bound: past `maxWaitingReplies` an event's answers are dropped, and
    /// the hub forgets them, as past the node's byte bound.
    @Test func answersPastTheBoundOfThoseWaitingAreDroppedAndTheHubForgetsThem() throws {
      let rig = try rig(maxWaitingReplies: 3)
      defer { rig.close() }
      let answers = Answers()
      func bob(_ id: String) -> RefusedRequest { RefusedRequest(sessionID: "bob-session", requestID: id) }
      // r1 waits for its event's batch; r2 and r3 (nothing here) wait behind it.
      rig.shell.add(copy(rig, 1))
      rig.shell.flush(replies: answers.replies("r1", rig))
      for id in ["r2", "r3"] {
        #expect(rig.shell.defersReplies(to: [bob(id)]))
        rig.shell.flush(replies: answers.replies(id, rig))
      }
      #expect(rig.shell.repliesWaiting == 3 && rig.hub.dropped.current == [])
      // Full: the next event's answers are dropped whole (two here), the next one's too.
      rig.shell.flush(replies: answers.replies(["r4", "r5"], rig))
      rig.shell.flush(replies: answers.replies("r6", rig))
      #expect(rig.shell.repliesWaiting == 3)
      #expect(rig.hub.dropped.current == [bob("r4"), bob("r5"), bob("r6")])
      #expect(rig.overBound.current == 3)
      // The batch stored, those waiting go, in order; the dropped ones never.
      rig.advance(by: .seconds(61))
      for _ in 0..<3 { #expect(answers.arrived.wait(timeout: .now() + 10) == .success) }
      #expect(answers.arrived.wait(timeout: .now() + 0.3) == .timedOut)
      #expect(answers.ids == ["r1", "r2", "r3"])
      #expect(rig.shell.repliesWaiting == 0)
      // Room again: the next answer waits and goes as before.
      rig.shell.add(copy(rig, 2))
      rig.shell.flush(replies: answers.replies("r7", rig))
      #expect(rig.shell.repliesWaiting == 1)
      rig.advance(by: .seconds(61))
      #expect(answers.arrived.wait(timeout: .now() + 10) == .success)
      #expect(answers.ids == ["r1", "r2", "r3", "r7"])
      #expect(rig.hub.dropped.current.count == 3)
    }

    @Test func answersWaitingWhenTheLeaseLapsesAreDroppedAndTheHubForgetsThem() throws {
      let rig = try rig()
      defer { rig.close() }
      let answers = Answers()
      rig.shell.add(copy(rig, 1))
      rig.shell.flush(replies: answers.replies("r1", rig))
      // No renewal for the lease: the queue is dropped, Alice's session closed here.
      rig.advance(by: .seconds(600))
      #expect(rig.hub.dropped.current == [RefusedRequest(sessionID: "bob-session", requestID: "r1")])
      #expect(answers.arrived.wait(timeout: .now() + 0.3) == .timedOut)
      #expect(answers.ids == [])
      #expect(try rig.stored() == [])
    }
  }
}
