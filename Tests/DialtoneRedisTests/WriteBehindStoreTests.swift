import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// The batch script on a real redis-server: what it stores is what today's resume replays, and
  /// what it refuses, per session.
  @Suite struct WriteBehindStoreBehaviour {
    typealias Batch = WriteBehindBatch

    /// Always the suite's one server: batches need one Redis (a Redis Cluster's layout is not built).
    private func redis() throws -> any RedisClient { try SharedRedis.server().connect(commandTimeout: .seconds(5)) }

    private func session() -> String { "s_" + UUID().uuidString }
    private func node() -> String { "n-" + UUID().uuidString }

    /// `{"seq":N,"n":<n>}`, numbered by the holder.
    private func bytes(_ n: Int, seq: UInt64) -> [UInt8] { Array(#"{"seq":\#(seq),"n":\#(n)}"#.utf8) }
    private func frame(_ n: Int, seq: UInt64, request: String? = nil) -> Batch.Frame {
      .init(seq: seq, bytes: bytes(n, seq: seq), requestID: request)
    }
    private func stored(_ id: String, _ seq: UInt64, _ n: Int) -> SessionLedger.Stored {
      .init(sessionID: id, seq: seq, bytes: bytes(n, seq: seq))
    }

    @Test func aBatchStoresSeveralSessionsFramesThatResumeReplaysWithTheirAnswers() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (alice, bob, holder, other) = (session(), session(), node(), node())
      let aliceEpoch = try ledger.open(alice, userId: "alice", deviceId: "phone", node: holder)
      let bobEpoch = try ledger.open(bob, userId: "bob", deviceId: "phone", node: holder)
      #expect(aliceEpoch == 1 && bobEpoch == 1)
      let batch = Batch(
        number: 1,
        sessions: [
          .init(id: bob, epoch: 1, frames: [frame(1, seq: 1), frame(2, seq: 2)]),
          .init(
            id: alice, epoch: 1, frames: [frame(101, seq: 1, request: "m1"), frame(102, seq: 2, request: "m2")],
            letterPosition: "1700000000000-3"),
        ])
      #expect(try store.store(batch, from: holder) == [:])
      #expect(try store.letterPosition(of: alice) == "1700000000000-3")
      #expect(try store.letterPosition(of: bob) == nil)
      // Another node resumes each (the holder died): today's resume reads what the batch stored.
      #expect(
        try ledger.resume(bob, userId: "bob", deviceId: "phone", from: 1, node: other)
          == .resumed(lastSeq: 2, epoch: 2, pending: [stored(bob, 2, 2)], replies: [:]))
      #expect(
        try ledger.resume(alice, userId: "alice", deviceId: "phone", from: 0, node: other)
          == .resumed(
            lastSeq: 2, epoch: 2, pending: [stored(alice, 1, 101), stored(alice, 2, 102)],
            replies: ["m1": bytes(101, seq: 1), "m2": bytes(102, seq: 2)]))
      // And store-first appends continue from the batch's last seq (one layout for both).
      #expect(
        try ledger.append(.init(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":3}"#.utf8)), to: bob, from: other)
          == .here(stored(bob, 3, 3)))
    }

    @Test func redisRefusesPerSessionAnOldEpochAGapOrNoSessionAndStoresTheRest() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (taken, gapped, fine, gone, holder, successor) = (session(), session(), session(), session(), node(), node())
      for id in [taken, gapped, fine] { try ledger.open(id, userId: "u-\(id)", deviceId: "phone", node: holder) }
      // Another node resumed `taken`: its epoch is 2 now.
      _ = try ledger.resume(taken, userId: "u-\(taken)", deviceId: "phone", from: 0, node: successor)
      let batch = Batch(
        number: 1,
        sessions: [
          .init(id: taken, epoch: 1, frames: [frame(1, seq: 1)], letterPosition: "5-0"),
          .init(id: gapped, epoch: 1, frames: [frame(2, seq: 2)]),
          .init(id: fine, epoch: 1, frames: [frame(3, seq: 1)]),
          .init(id: gone, epoch: 1, frames: [frame(4, seq: 1)]),
        ])
      #expect(try store.store(batch, from: holder) == [taken: .superseded, gapped: .gap, gone: .gone])
      #expect(try ledger.range(taken, after: 0) == .messages([]))
      // A refused session's letter position stays (its letters are its next resume's).
      #expect(try store.letterPosition(of: taken) == nil)
      #expect(try ledger.range(gapped, after: 0) == .messages([]))
      #expect(try ledger.range(fine, after: 0) == .messages([stored(fine, 1, 3)]))
      #expect(try ledger.exists(gone) == false)
      // The successor stores under the epoch it won.
      let next = Batch(number: 1, sessions: [.init(id: taken, epoch: 2, frames: [frame(5, seq: 1)])])
      #expect(try store.store(next, from: successor) == [:])
      #expect(try ledger.range(taken, after: 0) == .messages([stored(taken, 1, 5)]))
    }

    @Test func aBatchSentAgainAfterALostReplyStoresEachFrameOnce() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, holder) = (session(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      let first = Batch(number: 1, sessions: [.init(id: id, epoch: 1, frames: [frame(1, seq: 1), frame(2, seq: 2)])])
      #expect(try store.store(first, from: holder) == [:])
      // The reply was lost: the holder sends the frames again, with the ones queued since.
      let again = Batch(
        number: 2, sessions: [.init(id: id, epoch: 1, frames: [frame(1, seq: 1), frame(2, seq: 2), frame(3, seq: 3)])])
      #expect(try store.store(again, from: holder) == [:])
      #expect(try ledger.range(id, after: 0) == .messages([stored(id, 1, 1), stored(id, 2, 2), stored(id, 3, 3)]))
      // Frames stored before and a gap after them is still a gap.
      let gap = Batch(number: 3, sessions: [.init(id: id, epoch: 1, frames: [frame(3, seq: 3), frame(5, seq: 5)])])
      #expect(try store.store(gap, from: holder) == [id: .gap])
    }

    @Test func theSessionsBoundsAndReplyMemoryHoldAsForAppends() throws {
      let opened = LedgerAndStore(try redis(), limits: .init(capacity: 3, replyMemory: 2, expiry: .seconds(60)))
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, holder, other) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      let frames = (1...5).map { frame($0, seq: UInt64($0), request: "r\($0)") }
      #expect(
        try store.store(Batch(number: 1, sessions: [.init(id: id, epoch: 1, frames: frames)]), from: holder) == [:])
      // 1 and 2 dropped unacknowledged: a client behind them resyncs, never a gap.
      #expect(try ledger.range(id, after: 1) == .dropped)
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 1, node: other) == .resync)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 2, node: other)
          == .resumed(
            lastSeq: 5, epoch: 2, pending: [stored(id, 3, 3), stored(id, 4, 4), stored(id, 5, 5)],
            replies: ["r4": bytes(4, seq: 4), "r5": bytes(5, seq: 5)]))
    }

    /// The batch script and `appendStep` bound a session's log with one Lua function: frames
    /// stored in batches and the same frames appended one by one leave the same log and the same
    /// `last`, `bytes` and `dropped`, under the count bound, the byte bound and a frame larger
    /// than the byte bound (the newest is always kept).
    @Test func batchesAndAppendsTrimTheLogAlike() throws {
      let opened = LedgerAndStore(try redis(), limits: .init(capacity: 4, maxBytes: 120, expiry: .seconds(60)))
      defer { opened.close() }
      let (redis, ledger, store) = (opened.redis, opened.ledger, opened.store)
      let (appended, batched, holder) = (session(), session(), node())
      try ledger.open(appended, userId: "alice", deviceId: "phone", node: holder)
      try ledger.open(batched, userId: "alice", deviceId: "phone", node: holder)
      // `{"seq":N,"p":"x…"}`: 17 bytes for one x.
      let frames = [1, 1, 1, 1, 1, 1, 60, 200].map { pad in
        SessionLedger.Frame(
          head: Array(#"{"seq":"#.utf8), tail: Array(#","p":"\#(String(repeating: "x", count: pad))"}"#.utf8))
      }
      func state(_ id: String) throws -> [RedisReply] {
        try redis.pipeline([
          ["HMGET", .string("dt:session:{\(id)}:meta"), "last", "bytes", "dropped"],
          ["ZRANGE", .string("dt:session:{\(id)}:log"), "0", "-1", "WITHSCORES"],
        ])
      }
      // Six small frames (the count bound drops 1 and 2), a larger one (the byte bound drops 4),
      // one over the byte bound on its own (kept alone).
      for (number, range) in [(1, 0..<6), (2, 6..<7), (3, 7..<8)] {
        for frame in frames[range] { _ = try ledger.append(frame, to: appended, from: holder) }
        let batch = Batch(
          number: UInt64(number),
          sessions: [
            .init(
              id: batched, epoch: 1,
              frames: range.map { .init(seq: UInt64($0 + 1), bytes: frames[$0].bytes(seq: UInt64($0 + 1))) })
          ])
        #expect(try store.store(batch, from: holder) == [:])
        #expect(try state(batched) == state(appended), "after batch \(number)")
        if number == 2 {
          #expect(
            try ledger.range(batched, after: 4)
              == .messages(
                (5...7).map { .init(sessionID: batched, seq: $0, bytes: frames[Int($0) - 1].bytes(seq: $0)) }))
        }
        if number == 2 { #expect(try ledger.range(batched, after: 3) == .dropped) }
      }
      #expect(
        try ledger.range(batched, after: 7)
          == .messages([.init(sessionID: batched, seq: 8, bytes: frames[7].bytes(seq: 8))]))
      #expect(try ledger.range(batched, after: 6) == .dropped)
    }

    @Test func aBatchOfThousandsOfFramesForOneSessionIsStoredWhole() throws {
      let limits = SessionLedger.Limits(capacity: 10_000, maxBytes: 10 << 20, expiry: .seconds(60))
      let opened = LedgerAndStore(try redis(), limits: limits)
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, holder) = (session(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      // More frames than Lua's unpack takes in one call.
      let frames = (1...5000).map { frame($0, seq: UInt64($0)) }
      #expect(
        try store.store(Batch(number: 1, sessions: [.init(id: id, epoch: 1, frames: frames)]), from: holder) == [:])
      guard case .messages(let all) = try ledger.range(id, after: 0) else {
        Issue.record("not stored")
        return
      }
      #expect(all.count == 5000 && all.last == stored(id, 5000, 5000))
    }

    @Test func aClientAheadOfWhatWasStoredWithinTheAllowanceGoesOnFromItsOwnSeq() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, dead, next) = (session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: dead)
      let stored2 = Batch(number: 1, sessions: [.init(id: id, epoch: 1, frames: [frame(1, seq: 1), frame(2, seq: 2)])])
      #expect(try store.store(stored2, from: dead) == [:])
      // The dead holder had written candidates 3 and 4 too; the client processed them.
      #expect(try ledger.resume(id, userId: "alice", deviceId: "phone", from: 4, node: next) == .resync)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 4, node: next, allowingAhead: 1) == .resync)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 4, node: next, allowingAhead: 2)
          == .resumed(lastSeq: 4, epoch: 2, pending: [], replies: [:]))
      // The new holder numbers from 5; nothing at or below 4 can be replayed any more.
      #expect(
        try store.store(Batch(number: 1, sessions: [.init(id: id, epoch: 2, frames: [frame(5, seq: 5)])]), from: next)
          == [:])
      #expect(try ledger.range(id, after: 4) == .messages([stored(id, 5, 5)]))
      #expect(try ledger.range(id, after: 2) == .dropped)
      #expect(
        try ledger.resume(id, userId: "alice", deviceId: "phone", from: 3, node: dead, allowingAhead: 2) == .resync)
    }

    @Test func keysABatchCreatesExpireWithTheSession() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (redis, ledger, store) = (opened.redis, opened.ledger, opened.store)
      let (id, holder) = (session(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      let batch = Batch(
        number: 1,
        sessions: [
          .init(
            id: id, epoch: 1,
            frames: [frame(1, seq: 1, request: "r1"), .init(seq: 2, bytes: bytes(2, seq: 2), once: "c2")])
        ])
      #expect(try store.store(batch, from: holder) == [:])
      let clock = KeyClock(redis: redis)
      let keys = try clock.keys("dt:session:{\(id)}*")
      #expect(keys.count == 5)  // meta, log, replies, reply order, once-keys
      for (key, ttl) in try clock.ttls(keys) { #expect(ttl > 0 && ttl <= 60_000, "\(key): \(ttl)") }
    }

    /// Several frames of one session in one batch, with once-keys and request ids: each frame is
    /// stored, each once-key remembered in order (a copy another node sends later is refused, the
    /// next holder loads them) and bounded by the once memory within one batch and across two,
    /// each answer remembered.
    @Test func aSessionsFramesInOneBatchKeepTheirOnceKeysAndAnswers() throws {
      let opened = LedgerAndStore(try redis(), limits: .init(onceMemory: 4, expiry: .seconds(60)))
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, other, holder, next) = (session(), session(), node(), node())
      try ledger.open(id, userId: "alice", deviceId: "phone", node: holder)
      try ledger.open(other, userId: "bob", deviceId: "phone", node: holder)
      func copy(_ n: Int, seq: UInt64) -> Batch.Frame { .init(seq: seq, bytes: bytes(n, seq: seq), once: "c\(n)") }
      let first = Batch(
        number: 1,
        sessions: [
          .init(id: id, epoch: 1, frames: [copy(1, seq: 1), frame(2, seq: 2, request: "r2"), copy(3, seq: 3)]),
          .init(id: other, epoch: 1, frames: [copy(9, seq: 1)]),
        ])
      #expect(try store.store(first, from: holder) == [:])
      #expect(try ledger.range(id, after: 0) == .messages([stored(id, 1, 1), stored(id, 2, 2), stored(id, 3, 3)]))
      #expect(try store.claim(id, epoch: 1) == .init(lastSeq: 3, onces: ["c1", "c3"]))
      #expect(try store.claim(other, epoch: 1) == .init(lastSeq: 1, onces: ["c9"]))
      // Four more once-keys in one batch: the memory of four keeps the newest four.
      let second = Batch(
        number: 2,
        sessions: [.init(id: id, epoch: 1, frames: (4...7).map { copy($0, seq: UInt64($0)) })])
      #expect(try store.store(second, from: holder) == [:])
      #expect(try store.claim(id, epoch: 1) == .init(lastSeq: 7, onces: ["c4", "c5", "c6", "c7"]))
      // A copy of a stored candidate that another node sends is refused; one forgotten is not.
      let resumed = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 7, node: next)
      #expect(resumed == .resumed(lastSeq: 7, epoch: 2, pending: [], replies: ["r2": bytes(2, seq: 2)]))
      let head = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":0}"#.utf8))
      #expect(try ledger.append(head, to: id, from: next, once: "c5") == .duplicate)
      #expect(try ledger.append(head, to: id, from: next, once: "c1") == .here(stored(id, 8, 0)))
    }

    /// A session's frames that skip a seq within the batch are a gap, as one after the last seq
    /// stored is; a superseded session's are refused as superseded; the batch's other sessions are
    /// stored.
    @Test func framesSkippingASeqWithinTheBatchAreAGapAndTheRestIsStored() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (skipping, taken, fine, holder, successor) = (session(), session(), session(), node(), node())
      for id in [skipping, taken, fine] { try ledger.open(id, userId: "u-\(id)", deviceId: "phone", node: holder) }
      _ = try ledger.resume(taken, userId: "u-\(taken)", deviceId: "phone", from: 0, node: successor)
      let batch = Batch(
        number: 1,
        sessions: [
          .init(id: skipping, epoch: 1, frames: [frame(1, seq: 1), frame(3, seq: 3)], letterPosition: "5-0"),
          .init(id: taken, epoch: 1, frames: [frame(1, seq: 1), frame(3, seq: 3)]),
          .init(id: fine, epoch: 1, frames: [frame(1, seq: 1), frame(2, seq: 2)]),
        ])
      #expect(try store.store(batch, from: holder) == [skipping: .gap, taken: .superseded])
      #expect(try ledger.range(skipping, after: 0) == .messages([]))
      #expect(try store.letterPosition(of: skipping) == nil)
      #expect(try ledger.range(fine, after: 0) == .messages([stored(fine, 1, 1), stored(fine, 2, 2)]))
    }

    @Test func aStalledHoldersBatchIsRefusedOnceAnotherNodeResumedAndItClosesTheSession() throws {
      let opened = LedgerAndStore(try redis())
      defer { opened.close() }
      let (ledger, store) = (opened.ledger, opened.store)
      let (id, stalled, successor) = (session(), node(), node())
      let t0 = ContinuousClock.now
      var holder = WriteBehindHolder(limits: .init(lease: .seconds(10), margin: .seconds(2)), renewedAt: t0)
      let epoch = try ledger.open(id, userId: "alice", deviceId: "phone", node: stalled)
      _ = holder.hold(id, epoch: epoch, lastSeq: 0, now: t0)
      let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":1}"#.utf8))
      guard
        case .store(let batch)? = holder.submit([.init(session: id, frame: frame, kind: .candidate)], now: t0).effects
          .last
      else {
        Issue.record("no batch")
        return
      }
      // Frozen before the batch reached Redis; meanwhile the client resumed elsewhere.
      _ = try ledger.resume(id, userId: "alice", deviceId: "phone", from: 0, node: successor)
      let refused = try store.store(batch, from: stalled)
      #expect(refused == [id: .superseded])
      // Its candidate goes to the new holder, numbered there (the client may see it twice).
      #expect(
        holder.batchStored(batch.number, refused: refused, now: t0) == [
          .close(session: id, .refused(.superseded)), .unheld(.init(session: id, frame: frame, kind: .candidate)),
        ])
      #expect(try ledger.holder(of: id) == successor)
    }
  }
}
