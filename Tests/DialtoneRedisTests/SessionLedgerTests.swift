import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  @Suite struct SessionLedgerBehaviour {
    private func ledger(_ limits: SessionLedger.Limits = .init(expiry: .seconds(60))) throws -> SessionLedger {
      SessionLedger(try SharedRedis.client(), limits: limits)
    }

    private func session() -> String { "s_" + UUID().uuidString }
    private func node() -> String { "n-" + UUID().uuidString }

    /// A message whose seq the ledger fills in: `{"seq":N,"type":"ice","n":<n>}`.
    private func frame(_ n: Int) -> SessionLedger.Frame {
      .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"ice","n":\#(n)}"#.utf8))
    }

    private func stored(_ id: String, _ seq: UInt64, _ n: Int) -> SessionLedger.Stored {
      .init(sessionID: id, seq: seq, bytes: frame(n).bytes(seq: seq))
    }

    /// Stores messages `ns` from the session's holder, expecting each handed back with the next seq.
    private func append(_ ledger: SessionLedger, _ id: String, holder: String, _ ns: ClosedRange<Int>) throws {
      for n in ns {
        guard case .here(let stored) = try ledger.append(frame(n), to: id, from: holder) else {
          Issue.record("message \(n) was not stored for its holder")
          return
        }
        #expect(stored.bytes == frame(n).bytes(seq: stored.seq))
      }
    }

    @Test func anotherNodeResumesWithWhatTheClientHasNotSeenInOrder() throws {
      let ledger = try ledger()
      let (id, n1, n2, n3) = (session(), node(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      try append(ledger, id, holder: n1, 1...5)
      // The client saw 1...3 when its node died.
      let resumed = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 3, node: n2)
      #expect(resumed == .resumed(lastSeq: 5, epoch: 2, pending: [stored(id, 4, 4), stored(id, 5, 5)], replies: [:]))
      #expect(try ledger.holder(of: id) == n2)
      // The new holder gets what is stored from now on; a second resume replays each once more.
      try append(ledger, id, holder: n2, 6...6)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 5, node: n3)
          == .resumed(lastSeq: 6, epoch: 3, pending: [stored(id, 6, 6)], replies: [:]))
      // Nothing pending when the client had everything.
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 6, node: n1)
          == .resumed(lastSeq: 6, epoch: 4, pending: [], replies: [:]))
    }

    @Test func aMessageFromAnotherNodeGoesToTheHoldersInboxAsALetter() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let presence = ClusterPresence(redis, nodeExpiry: .seconds(60))
      let mailbox = NodeMailbox(redis, capacity: 100, expiry: .seconds(60))
      let (id, holder, producer) = (session(), node(), node())
      try presence.heartbeat(holder)
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      #expect(try ledger.append(frame(1), to: id, from: producer) == .sent(seq: 1))
      let letters = try mailbox.receive(holder, after: "0", limit: 10, timeout: .milliseconds(10))
      #expect(
        letters.map(\.payload) == [
          Array((SessionLedger.letterHeader(sessionID: id, seq: 1) + "\n").utf8) + frame(1).bytes(seq: 1)
        ])
      // A holder whose heartbeat stopped is not written to: the message waits for the resume.
      try presence.leave(holder)
      #expect(try ledger.append(frame(2), to: id, from: producer) == .kept(seq: 2))
      #expect(try mailbox.backlog(of: holder) == 1)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: producer)
          == .resumed(lastSeq: 2, epoch: 2, pending: [stored(id, 1, 1), stored(id, 2, 2)], replies: [:]))
    }

    @Test func deliveringToAUserReachesEverySessionThePresenceListsDeadHoldersToo() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let presence = ClusterPresence(redis, nodeExpiry: .seconds(60))
      let alice = "alice-" + UUID().uuidString
      let (here, dead) = (node(), node())
      let (phone, laptop, watch, tablet) = (session(), session(), session(), session())
      try presence.heartbeat(here)
      try ledger.open(phone, userId: alice, deviceId: "phone", node: here)
      try ledger.open(laptop, userId: alice, deviceId: "laptop", node: dead)
      try ledger.open(watch, userId: alice, deviceId: "watch", node: here)
      try presence.register(.init(deviceId: "phone", node: here, sessionID: phone), of: alice)
      try presence.register(.init(deviceId: "laptop", node: dead, sessionID: laptop), of: alice)
      try presence.register(.init(deviceId: "watch", node: here, sessionID: watch), of: alice)
      // The tablet's session expired: its entry leaves the presence on the next delivery.
      try presence.register(.init(deviceId: "tablet", node: here, sessionID: tablet), of: alice)

      let all = try ledger.deliver(frame(1), toUser: alice, device: nil, skipping: ["watch"], from: here)
      #expect(all.here == [stored(phone, 1, 1)])
      #expect(all.stored == 2)
      #expect(try redis.command(["HEXISTS", .string("dt:presence:{\(alice)}"), "tablet"]) == .integer(0))
      let one = try ledger.deliver(frame(2), toUser: alice, device: "watch", from: here)
      #expect(one.here == [stored(watch, 1, 2)] && one.stored == 1)
      // One device named (its entry is read alone): one not listed gets nothing, and one whose
      // session is gone leaves the presence as it does from a delivery to every device.
      #expect(try ledger.deliver(frame(3), toUser: alice, device: "car", from: here).stored == 0)
      try presence.register(.init(deviceId: "tablet", node: here, sessionID: tablet), of: alice)
      #expect(try ledger.deliver(frame(3), toUser: alice, device: "tablet", from: here).stored == 0)
      #expect(try redis.command(["HEXISTS", .string("dt:presence:{\(alice)}"), "tablet"]) == .integer(0))
      // The laptop's node died, but its session keeps what it missed for its resume.
      #expect(
        try ledger.resume(laptop, userId: alice, deviceId: "laptop", from: 0, node: here)
          == .resumed(lastSeq: 1, epoch: 2, pending: [stored(laptop, 1, 1)], replies: [:]))
    }

    @Test func aOnceKeyStoresAMessageOncePerSession() throws {
      let ledger = try ledger(.init(onceMemory: 2, expiry: .seconds(60)))
      let (id, n1) = (session(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      #expect(try ledger.append(frame(1), to: id, from: n1, once: "invite c1") == .here(stored(id, 1, 1)))
      #expect(try ledger.append(frame(1), to: id, from: n1, once: "invite c1") == .duplicate)
      #expect(try ledger.append(frame(2), to: id, from: n1, once: "accept c1") == .here(stored(id, 2, 2)))
      #expect(try ledger.append(frame(3), to: id, from: n1, once: "accept c2") == .here(stored(id, 3, 3)))
      // Bounded: the oldest key is forgotten.
      #expect(try ledger.append(frame(1), to: id, from: n1, once: "invite c1") == .here(stored(id, 4, 1)))
    }

    @Test func acknowledgedMessagesAreNotReplayed() throws {
      let ledger = try ledger()
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      try append(ledger, id, holder: n1, 1...4)
      try ledger.acknowledge(id, through: 2)
      // An ack beyond what was stored acknowledges only what was stored.
      try ledger.acknowledge(id, through: 99)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 4, node: n2)
          == .resumed(lastSeq: 4, epoch: 2, pending: [], replies: [:]))
      // From before its own ack a client would miss what the ack removed: resync, not a gap.
      let fresh = session()
      try ledger.open(fresh, userId: "alice", deviceId: "phone", node: n1)
      try append(ledger, fresh, holder: n1, 1...3)
      try ledger.acknowledge(fresh, through: 2)
      #expect(try ledger.resume(fresh, userId: "alice", deviceId: "phone", from: 1, node: n2) == .resync)
      #expect(
        try ledger.resume(fresh, userId: "alice", deviceId: "phone", from: 2, node: n2)
          == .resumed(lastSeq: 3, epoch: 2, pending: [stored(fresh, 3, 3)], replies: [:]))
    }

    @Test func severalSessionsAcknowledgedInOneRoundTripForgetWhatTheirClientsHave() throws {
      let ledger = try ledger()
      let (first, second, gone, n1, n2) = (session(), session(), session(), node(), node())
      try ledger.open(first, userId: "alice", deviceId: "phone", node: n1)
      try ledger.open(second, userId: "bob", deviceId: "phone", node: n1)
      try append(ledger, first, holder: n1, 1...3)
      try append(ledger, second, holder: n1, 1...3)
      // A session that ended meanwhile is skipped; an ack past what was stored is bounded.
      try ledger.acknowledge([(first, 2), (gone, 5), (second, 99)])
      #expect(
        try ledger.resume(first, userId: "alice", deviceId: "phone", from: 2, node: n2)
          == .resumed(lastSeq: 3, epoch: 2, pending: [stored(first, 3, 3)], replies: [:]))
      #expect(try ledger.resume(first, userId: "alice", deviceId: "phone", from: 1, node: n2) == .resync)
      #expect(
        try ledger.resume(second, userId: "bob", deviceId: "phone", from: 3, node: n2)
          == .resumed(lastSeq: 3, epoch: 2, pending: [], replies: [:]))
    }

    @Test func aClientBehindWhatWasDroppedOrAheadOfWhatWasStoredMustResync() throws {
      let ledger = try ledger(.init(capacity: 3, expiry: .seconds(60)))
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      try append(ledger, id, holder: n1, 1...5)  // 1 and 2 dropped: 3...5 kept
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: n2) == .resync)
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 6, node: n2) == .resync)
      #expect(try ledger.range(id, after: 1) == .dropped)
      #expect(try ledger.range(id, after: 3) == .messages([stored(id, 4, 4), stored(id, 5, 5)]))
      // From the last dropped seq everything after it is still held.
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: n2)
          == .resumed(
            lastSeq: 5, epoch: 2, pending: [stored(id, 3, 3), stored(id, 4, 4), stored(id, 5, 5)], replies: [:]))
      #expect(try ledger.range(session(), after: 0) == .gone)
    }

    @Test func theByteBoundDropsTheOldestButKeepsTheNewest() throws {
      let ledger = try ledger(.init(maxBytes: 100, expiry: .seconds(60)))
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      let big = SessionLedger.Frame(head: [UInt8](repeating: 0x61, count: 59), tail: [])
      for _ in 1...3 { _ = try ledger.append(big, to: id, from: n1) }
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: n2) == .resync)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: n2)
          == .resumed(
            lastSeq: 3, epoch: 2, pending: [.init(sessionID: id, seq: 3, bytes: big.bytes(seq: 3))], replies: [:]))
      // One message over the bound is still kept: the newest is never dropped.
      let huge = SessionLedger.Frame(head: [UInt8](repeating: 0x62, count: 500), tail: [])
      #expect(
        try ledger.append(huge, to: id, from: n2) == .here(.init(sessionID: id, seq: 4, bytes: huge.bytes(seq: 4))))
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 3, node: n1)
          == .resumed(
            lastSeq: 4, epoch: 3, pending: [.init(sessionID: id, seq: 4, bytes: huge.bytes(seq: 4))], replies: [:]))
    }

    @Test func messagesComeBackByteForByte() throws {
      let ledger = try ledger()
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      // Colons, NUL, CRLF, invalid UTF-8.
      let odd = SessionLedger.Frame(head: [0x3A, 0x00, 0xFF], tail: [0x0D, 0x0A, 0x3A, 0x31, 0x3A])
      _ = try ledger.append(odd, to: id, from: n1)
      _ = try ledger.append(odd, to: id, from: n1)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: n2)
          == .resumed(
            lastSeq: 2, epoch: 2,
            pending: [
              .init(sessionID: id, seq: 1, bytes: odd.bytes(seq: 1)),
              .init(sessionID: id, seq: 2, bytes: odd.bytes(seq: 2)),
            ],
            replies: [:]))
    }

    @Test func anotherDeviceOrAnUnknownSessionIsGone() throws {
      let ledger = try ledger()
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      #expect(try ledger.resume(id, userId: "alice", deviceId: "laptop", from: 0, node: n2) == .gone)
      #expect(try ledger.resume(id, userId: "mallory", deviceId: "phone", from: 0, node: n2) == .gone)
      #expect(try ledger.resume(session(), userId: "alice", deviceId: "phone", from: 0, node: n2) == .gone)
      #expect(try ledger.append(frame(1), to: session(), from: n1) == .gone)
    }

    @Test func onlyTheHolderEndsASession() throws {
      let ledger = try ledger()
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      _ = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: n2)
      // n1's expiry timer fires late: the session lives on at n2.
      #expect(try !ledger.end(id, heldBy: n1))
      #expect(try ledger.exists(id))
      #expect(try ledger.end(id, heldBy: n2))
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: n2) == .gone)
    }

    @Test func anUntouchedSessionExpiresAndATouchedOneStays() throws {
      // An hour's expiry, passed with `KeyClock` rather than waited for: no pause of a busy
      // machine can let the touched session lapse between two of the test's steps.
      let expiry: Duration = .seconds(3600)
      let ledger = try ledger(.init(expiry: expiry))
      let (kept, dropped, n1) = (session(), session(), node())
      for id in [kept, dropped] {
        try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
        try append(ledger, id, holder: n1, 1...1)
      }
      _ = try ledger.append(frame(2), to: dropped, from: n1, requestID: "r", once: "k")
      let raw = try SharedRedis.client()
      defer { raw.close() }
      let clock = KeyClock(redis: raw)
      let keptKeys = try clock.keys("dt:session:{\(kept)}*")
      let droppedKeys = try clock.keys("dt:session:{\(dropped)}*")
      // Every key of a session carries the expiry: its log, answers and once-keys go with it.
      #expect(droppedKeys.count == 5)
      for (key, ttl) in try clock.ttls(keptKeys + droppedKeys) {
        #expect(ttl > 0 && ttl <= 3_600_000, "\(key): \(ttl)")
      }
      // Most of the expiry passes; the holder touches only `kept`, which starts its expiry afresh.
      try clock.advance(.seconds(3000), over: keptKeys + droppedKeys)
      #expect(try clock.keys("dt:session:{\(dropped)}*") == droppedKeys)
      #expect(try ledger.touch([kept]) == [])
      for (key, ttl) in try clock.ttls(keptKeys) {
        #expect(ttl > 600_000, "\(key) was not refreshed: \(ttl)")
      }
      // The rest of the untouched session's expiry passes.
      try clock.advance(.seconds(3000), over: keptKeys + droppedKeys)
      #expect(try clock.keys("dt:session:{\(dropped)}*") == [])
      #expect(try clock.keys("dt:session:{\(kept)}*") == keptKeys)
      #expect(try ledger.resume(dropped, userId: "alice", deviceId: "phone", from: 0, node: n1) == .gone)
      #expect(try ledger.touch([kept, dropped]) == [dropped])
      #expect(
        try ledger.resume(kept, userId: "alice", deviceId: "phone", from: 0, node: n1)
          == .resumed(lastSeq: 1, epoch: 2, pending: [stored(kept, 1, 1)], replies: [:]))
    }

    @Test func answersAreRememberedWithTheirMessageAndBounded() throws {
      let ledger = try ledger(.init(replyMemory: 3, expiry: .seconds(60)))
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      for n in 1...3 { _ = try ledger.append(frame(n), to: id, from: n1, requestID: "r\(n)") }
      _ = try ledger.append(frame(10), to: id, from: n1, requestID: "r1")  // replaced, not re-queued
      _ = try ledger.append(frame(4), to: id, from: n1, requestID: "r4")  // evicts r1, the oldest
      guard
        case .resumed(_, _, _, let replies) = try ledger.resume(
          id, userId: "alice", deviceId: "phone", from: 0, node: n2)
      else {
        Issue.record("no resume")
        return
      }
      #expect(replies == ["r2": frame(2).bytes(seq: 2), "r3": frame(3).bytes(seq: 3), "r4": frame(4).bytes(seq: 5)])
    }

    @Test func reopeningASessionIdStartsItAfresh() throws {
      let ledger = try ledger()
      let (id, n1, n2) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: n1)
      _ = try ledger.append(frame(1), to: id, from: n1, requestID: "r1", once: "k")
      // The epoch goes on from the old session's: a write-behind holder of that one is refused.
      #expect(try ledger.open(id, userId: "alice", deviceId: "phone", node: n2) == 2)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: n1)
          == .resumed(lastSeq: 0, epoch: 3, pending: [], replies: [:]))
      #expect(try ledger.append(frame(1), to: id, from: n1, once: "k") == .here(stored(id, 1, 1)))
    }

    @Test func stepsRunAsOneTransactionWithEachResult() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      try redis.load(SessionLedger.scripts)
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let presence = ClusterPresence(redis, nodeExpiry: .seconds(60))
      let (id, n1, n2) = (session(), node(), node())
      let bob = "bob-" + UUID().uuidString
      try ledger.open(id, userId: bob, deviceId: "phone", node: n1)
      try presence.register(.init(deviceId: "phone", node: n1, sessionID: id), of: bob)
      let results = try ledger.run(
        [
          .append(frame(1), session: id, requestID: "r1", once: nil),
          .deliver(frame(2), user: bob, device: nil, skipping: [], once: "k"),
          .deliver(frame(2), user: bob, device: nil, skipping: [], once: "k"),
          .append(frame(3), session: session(), requestID: nil, once: nil),
          .acknowledge(session: id, through: 1),
          .letter(Array("hello".utf8), to: n2),
        ], from: n1)
      #expect(results.count == 6)
      #expect(results[0] == .appended(.here(stored(id, 1, 1))))
      #expect(results[1] == .delivered(here: [stored(id, 2, 2)], stored: 1))
      #expect(results[2] == .delivered(here: [], stored: 0))
      #expect(results[3] == .appended(.gone))
      #expect(results[4] == .acknowledged)
      guard case .sent(.sent) = results[5] else {
        Issue.record("the letter was not sent: \(results[5])")
        return
      }
      #expect(
        try ledger.resume(id, userId: bob, deviceId: "phone", from: 1, node: n2)
          == .resumed(lastSeq: 2, epoch: 2, pending: [stored(id, 2, 2)], replies: ["r1": frame(1).bytes(seq: 1)]))
    }

    @Test func aPoisonedSessionCanOnlyResync() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let ledger = SessionLedger(redis, limits: .init(expiry: .seconds(60)))
      let (id, n1, n2) = (session(), node(), node())
      let alice = "alice-" + UUID().uuidString
      try ledger.open(id, userId: alice, deviceId: "phone", node: n1)
      try ClusterPresence(redis, nodeExpiry: .seconds(3)).register(
        .init(deviceId: "phone", node: n1, sessionID: id), of: alice)
      #expect(try ledger.sessions(ofUser: alice) == [id])
      try append(ledger, id, holder: n1, 1...2)
      // A message for it was lost: no resume may carry on past the hole.
      #expect(try ledger.poison(id) == n1)
      #expect(try ledger.resume(id, userId: alice, deviceId: "phone", from: 2, node: n2) == .resync)
      #expect(try ledger.range(id, after: 2) == .dropped)
      #expect(try ledger.poison(session()) == nil)
    }

    @Test func concurrentAppendsFromTwoNodesGetDistinctSeqsInOneOrder() async throws {

      let (id, holder) = (session(), node())
      let setup = try ledger()
      try setup.open(id, userId: "alice", deviceId: "phone", node: holder)
      try await withThrowingTaskGroup(of: Void.self) { group in
        for producer in 0..<2 {
          group.addTask {
            let ledger = SessionLedger(try SharedRedis.client(), limits: .init(expiry: .seconds(60)))
            for n in 0..<50 { _ = try ledger.append(self.frame(producer * 100 + n), to: id, from: "p\(producer)") }
          }
        }
        try await group.waitForAll()
      }
      guard case .messages(let all) = try setup.range(id, after: 0) else {
        Issue.record("no messages")
        return
      }
      #expect(all.map(\.seq) == Array(1...100))
      // Each producer's messages keep their order.
      for producer in 0..<2 {
        let mine = all.compactMap { stored -> Int? in
          let text = String(decoding: stored.bytes, as: UTF8.self)
          guard let n = Int(text.split(separator: ":").last?.dropLast() ?? "") else { return nil }
          return n / 100 == producer ? n : nil
        }
        #expect(mine == (0..<50).map { producer * 100 + $0 })
      }
    }
  }
}
