import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  @Suite struct SessionLedgerBehaviour {
    private func ledger(_ limits: SessionLedger.Limits = .init(expiry: .seconds(60))) throws -> SessionLedger {
      SessionLedger(try SharedRedis.server().connect(), limits: limits)
    }

    private func session() -> String { "s-" + UUID().uuidString }

    private func message(_ n: Int) -> [UInt8] { Array("{\"seq\":\(n),\"type\":\"ice\"}".utf8) }

    /// Writes messages `seqs` as `epoch`, expecting each stored.
    private func append(_ ledger: SessionLedger, _ id: String, epoch: Int64, _ seqs: ClosedRange<Int>) throws {
      for n in seqs {
        #expect(try ledger.append(id, epoch: epoch, seq: UInt64(n), message: message(n)) == .stored)
      }
    }

    @Test func anotherNodeResumesWithWhatTheClientHasNotSeenInOrder() throws {
      let ledger = try ledger()
      let id = session()
      let claim = try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      #expect(claim == .init(epoch: 1, lastSeq: 0))
      try append(ledger, id, epoch: 1, 1...5)
      // The client saw 1...3 when its node died.
      let resumed = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 3, node: "n2")
      #expect(resumed == .resumed(.init(epoch: 2, lastSeq: 5), pending: [message(4), message(5)]))
      // The new owner continues the seq; a second resume gets each message exactly once more.
      try append(ledger, id, epoch: 2, 6...6)
      let again = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 5, node: "n3")
      #expect(again == .resumed(.init(epoch: 3, lastSeq: 6), pending: [message(6)]))
      // Nothing pending when the client had everything.
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 6, node: "n1")
          == .resumed(.init(epoch: 4, lastSeq: 6), pending: []))
    }

    @Test func theOldOwnerIsFencedOnceTheSessionMoved() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, id, epoch: 1, 1...2)
      _ = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: "n2")
      // n1 did not die after all (a partition): its late writes must not interleave.
      #expect(try ledger.append(id, epoch: 1, seq: 3, message: message(3)) == .fenced)
      #expect(try !ledger.remember(id, epoch: 1, requestID: "r1", reply: Array("late".utf8)))
      #expect(try ledger.append(id, epoch: 2, seq: 3, message: message(3)) == .stored)
    }

    @Test func aSeqThatDoesNotContinueTheLogIsRefused() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, id, epoch: 1, 1...2)
      #expect(try ledger.append(id, epoch: 1, seq: 4, message: message(4)) == .outOfOrder(last: 2))
      #expect(try ledger.append(id, epoch: 1, seq: 2, message: message(2)) == .outOfOrder(last: 2))
      #expect(try ledger.append(session(), epoch: 1, seq: 1, message: message(1)) == .gone)
    }

    @Test func acknowledgedMessagesAreNotReplayed() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, id, epoch: 1, 1...4)
      try ledger.acknowledge(id, through: 2)
      // An ack beyond what was sent acknowledges only what was sent.
      try ledger.acknowledge(id, through: 99)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 4, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 4), pending: []))
      // From the acknowledged seq on, the rest is replayed; from before its own ack a client
      // would miss what the ack removed, so it is told to resync instead of handed a gap.
      let fresh = session()
      try ledger.open(fresh, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, fresh, epoch: 1, 1...3)
      try ledger.acknowledge(fresh, through: 2)
      #expect(try ledger.resume(fresh, userId: "alice", deviceId: "phone", from: 1, node: "n2") == .resync)
      #expect(
        try ledger.resume(fresh, userId: "alice", deviceId: "phone", from: 2, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 3), pending: [message(3)]))
    }

    @Test func aClientBehindWhatWasDroppedOrAheadOfWhatWasSentMustResync() throws {
      let ledger = try ledger(.init(capacity: 3, expiry: .seconds(60)))
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, id, epoch: 1, 1...5)  // 1 and 2 dropped: 3...5 kept
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: "n2") == .resync)
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 6, node: "n2") == .resync)
      // From the last dropped seq everything after it is still held.
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 5), pending: [message(3), message(4), message(5)]))
    }

    @Test func theByteBoundDropsTheOldestButKeepsTheNewest() throws {
      let ledger = try ledger(.init(maxBytes: 100, expiry: .seconds(60)))
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      let big = [UInt8](repeating: 0x61, count: 60)
      for seq in 1...3 { #expect(try ledger.append(id, epoch: 1, seq: UInt64(seq), message: big) == .stored) }
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: "n2") == .resync)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 3), pending: [big]))
      // One message over the bound is still kept: the newest is never dropped.
      let huge = [UInt8](repeating: 0x62, count: 500)
      #expect(try ledger.append(id, epoch: 2, seq: 4, message: huge) == .stored)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 3, node: "n3")
          == .resumed(.init(epoch: 3, lastSeq: 4), pending: [huge]))
    }

    @Test func messagesComeBackByteForByte() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      let odd: [UInt8] = [0x3A, 0x00, 0xFF, 0x0D, 0x0A, 0x3A, 0x31, 0x3A]  // colons, NUL, CRLF, invalid UTF-8
      #expect(try ledger.append(id, epoch: 1, seq: 1, message: odd) == .stored)
      #expect(try ledger.append(id, epoch: 1, seq: 2, message: odd) == .stored)  // equal bytes, two entries
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 2), pending: [odd, odd]))
    }

    @Test func anotherDeviceOrAnUnknownSessionIsGone() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      #expect(try ledger.resume(id, userId: "alice", deviceId: "laptop", from: 0, node: "n2") == .gone)
      #expect(try ledger.resume(id, userId: "mallory", deviceId: "phone", from: 0, node: "n2") == .gone)
      #expect(try ledger.resume(session(), userId: "alice", deviceId: "phone", from: 0, node: "n2") == .gone)
      try ledger.forget(id)
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: "n2") == .gone)
    }

    @Test func anUntouchedSessionExpiresAndATouchedOneStays() async throws {
      let ledger = try ledger(.init(expiry: .milliseconds(300)))
      let kept = session()
      let dropped = session()
      for id in [kept, dropped] {
        try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
        try append(ledger, id, epoch: 1, 1...1)
      }
      let gone = await eventually(within: 10) {
        _ = try? ledger.touch([kept])
        return (try? ledger.exists(dropped)) == false
      }
      #expect(gone)
      #expect(try ledger.resume(dropped, userId: "alice", deviceId: "phone", from: 0, node: "n2") == .gone)
      #expect(try ledger.touch([kept, dropped]) == 1)
      #expect(
        try ledger.resume(kept, userId: "alice", deviceId: "phone", from: 0, node: "n2")
          == .resumed(.init(epoch: 2, lastSeq: 1), pending: [message(1)]))
    }

    @Test func repliesAreRememberedReplacedAndBounded() throws {
      let ledger = try ledger(.init(replyMemory: 3, expiry: .seconds(60)))
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      for n in 1...3 { #expect(try ledger.remember(id, epoch: 1, requestID: "r\(n)", reply: message(n))) }
      #expect(try ledger.remember(id, epoch: 1, requestID: "r1", reply: message(10)))  // replaced, not re-queued
      #expect(try ledger.reply(id, requestID: "r1") == message(10))
      #expect(try ledger.remember(id, epoch: 1, requestID: "r4", reply: message(4)))  // evicts r1, the oldest
      #expect(try ledger.reply(id, requestID: "r1") == nil)
      #expect(try ledger.reply(id, requestID: "r2") == message(2))
      #expect(try ledger.reply(id, requestID: "r4") == message(4))
      // The new owner after a resume reads them.
      _ = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: "n2")
      #expect(try ledger.reply(id, requestID: "r3") == message(3))
    }

    @Test func reopeningASessionIdStartsItAfresh() throws {
      let ledger = try ledger()
      let id = session()
      try ledger.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(ledger, id, epoch: 1, 1...3)
      try ledger.remember(id, epoch: 1, requestID: "r1", reply: message(1))
      #expect(try ledger.open(id, userId: "alice", deviceId: "phone", node: "n2") == .init(epoch: 1, lastSeq: 0))
      #expect(try ledger.reply(id, requestID: "r1") == nil)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: "n3")
          == .resumed(.init(epoch: 2, lastSeq: 0), pending: []))
    }

    @Test func concurrentResumesOnTwoNodesLeaveOneOwner() async throws {
      let server = try SharedRedis.server()
      let id = session()
      let setup = try ledger()
      try setup.open(id, userId: "alice", deviceId: "phone", node: "n1")
      try append(setup, id, epoch: 1, 1...3)
      let epochs = try await withThrowingTaskGroup(of: Int64?.self) { group in
        for node in ["n2", "n3"] {
          group.addTask {
            let ledger = SessionLedger(try server.connect(), limits: .init(expiry: .seconds(60)))
            guard
              case .resumed(let claim, let pending) = try ledger.resume(
                id, userId: "alice", deviceId: "phone", from: 1, node: node)
            else { return nil }
            #expect(pending.count == 2)
            return claim.epoch
          }
        }
        var epochs: [Int64] = []
        for try await epoch in group { if let epoch { epochs.append(epoch) } }
        return epochs.sorted()
      }
      #expect(epochs == [2, 3])
      // Only the later claim may write.
      #expect(try setup.append(id, epoch: 2, seq: 4, message: message(4)) == .fenced)
      #expect(try setup.append(id, epoch: 3, seq: 4, message: message(4)) == .stored)
    }
  }
}
