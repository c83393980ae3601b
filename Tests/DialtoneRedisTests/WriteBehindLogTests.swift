import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

extension RedisTests {
  /// The node log's scripts on a real redis-server (and on a Redis Cluster with
  /// `DIALTONE_TEST_REDIS=cluster`: each script's keys are one stripe's, in one slot).
  @Suite struct WriteBehindLogBehaviour {
    typealias Frame = WriteBehindLogEntry.Frame

    /// One stripe: every session's frames land in the same entries, and a take must pick its own.
    private func log(_ redis: any RedisClient, stripes: Int = 1) -> WriteBehindLog {
      WriteBehindLog(redis, stripes: stripes, expiry: .seconds(60), onceTrims: 4)
    }

    private func session() -> String { "s_" + UUID().uuidString }
    private func node() -> String { "n-" + UUID().uuidString }

    private func frame(
      _ session: String, _ seq: UInt64, epoch: UInt64 = 1, once: String? = nil, request: String? = nil,
      letter: String? = nil
    ) -> Frame {
      .init(
        session: session, epoch: epoch, seq: seq, bytes: Array(#"{"seq":\#(seq),"s":"\#(session)"}"#.utf8),
        once: once, requestID: request, letterPosition: letter)
    }

    private func entry(_ frames: Frame...) -> WriteBehindLogEntry { WriteBehindLogEntry(frames: frames) }

    private func taken(_ result: WriteBehindLog.Taken) -> WriteBehindLogTaken? {
      if case .taken(let taken) = result { return taken }
      Issue.record("not taken: \(result)")
      return nil
    }

    @Test func aTakeReturnsExactlyTheSessionsFramesInOrderWithTheirOncesAnswersAndLetterPosition() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, bob, holder) = (session(), session(), node())
      #expect(
        try log.append(
          entry(frame(alice, 1, once: "o1"), frame(bob, 1), frame(alice, 2, request: "m1", letter: "5-1")),
          node: holder, stripe: 0, takes: 0) == .appended(number: 0))
      #expect(
        try log.append(
          entry(frame(bob, 2, letter: "5-2"), frame(alice, 3, once: "o3")), node: holder, stripe: 0, takes: 0)
          == .appended(number: 1))
      let got = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(
        got.frames == [
          frame(alice, 1, once: "o1"), frame(alice, 2, request: "m1", letter: "5-1"), frame(alice, 3, once: "o3"),
        ])
      #expect(got.last == 3)
      #expect(got.onces == ["o1", "o3"])
      #expect(got.replies == ["m1": frame(alice, 2).bytes])
      #expect(got.letterPosition == "5-1")
      // Nothing for a session the stripe never held.
      let none = try #require(taken(try log.take(session(), epoch: 2, from: holder)))
      #expect(none.frames.isEmpty && none.last == nil && none.letterPosition == nil && none.onces.isEmpty)
    }

    @Test func anAppendAfterATakeIsRefusedAndTheOtherSessionsFramesAreKept() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, bob, holder) = (session(), session(), node())
      _ = try log.append(entry(frame(alice, 1), frame(bob, 1)), node: holder, stripe: 0, takes: 0)
      _ = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      // The holder did not know: refused whole, told which session went.
      #expect(
        try log.append(entry(frame(alice, 2), frame(bob, 2)), node: holder, stripe: 0, takes: 0)
          == .refused(takes: 1, taken: [alice: 2]))
      // It drops alice and appends again with the take count it learnt.
      #expect(try log.append(entry(frame(bob, 2)), node: holder, stripe: 0, takes: 1) == .appended(number: 1))
      let bobs = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      #expect(bobs.frames == [frame(bob, 1), frame(bob, 2)])
      // A second take of alice (its first taker died before storing) reads the same: nothing after the take.
      let again = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(again.frames == [frame(alice, 1)])
    }

    @Test func ofTwoTakesRacingTheLaterEpochWinsAndAnOlderOrEqualOneIsRefused() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, holder) = (session(), node())
      _ = try log.append(entry(frame(alice, 1)), node: holder, stripe: 0, takes: 0)
      // The taker at epoch 3 reaches the stripe first; the one at 2 (it moved the meta first, then lost it) after.
      _ = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(try log.take(alice, epoch: 2, from: holder) == .refused(epoch: 3))
      #expect(try log.take(alice, epoch: 3, from: holder) == .refused(epoch: 3))
      // In the other order, both read the same frames: the holder's appends stopped at the first.
      let later = try #require(taken(try log.take(alice, epoch: 4, from: holder)))
      #expect(later.frames == [frame(alice, 1)])
      #expect(
        try log.append(entry(frame(alice, 2)), node: holder, stripe: 0, takes: 0)
          == .refused(takes: 2, taken: [alice: 4])
      )
    }

    @Test func aTrimKeepsWhatATakenSessionStillNeedsUntilItsTakerReleasesIt() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, bob, holder) = (session(), session(), node())
      for seq in UInt64(1)...3 {
        _ = try log.append(entry(frame(alice, seq), frame(bob, seq)), node: holder, stripe: 0, takes: 0)
      }
      _ = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      // A trim by a holder that has not learnt of the take is refused, and tells it.
      #expect(
        try log.trim(node: holder, stripe: 0, keepFrom: 3, takes: 0, checkpoints: [:], onces: .init([]))
          == .refused(takes: 1, taken: [alice: 2]))
      // Bob's clients acknowledged everything: the holder may trim, but the taker's entries stay.
      #expect(
        try log.trim(
          node: holder, stripe: 0, keepFrom: 3, takes: 1, checkpoints: [bob: .init(last: 3, letterPosition: nil)],
          onces: .init([])) == .trimmed(head: 0))
      #expect(try #require(taken(try log.take(alice, epoch: 3, from: holder))).frames.count == 3)
      // The taker at epoch 2 is not the last one: its release leaves the entries.
      #expect(try log.release(alice, epoch: 2, from: holder) == false)
      #expect(try log.release(alice, epoch: 3, from: holder) == true)
      #expect(
        try log.trim(node: holder, stripe: 0, keepFrom: 3, takes: 2, checkpoints: [:], onces: .init([]))
          == .trimmed(head: 3))
      // Entries after a trim keep their numbers.
      #expect(try log.append(entry(frame(bob, 4)), node: holder, stripe: 0, takes: 2) == .appended(number: 3))
      let bobs = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      #expect(bobs.frames == [frame(bob, 4)] && bobs.last == 4)
    }

    /// A taker that released before the holder's next append: the holder is still told (the
    /// release keeps the take as released until then), and a take at an older epoch arriving
    /// after the release is still refused (R1 behind R2).
    @Test func aHolderIsToldOfATakeReleasedBeforeItsNextAppendAndALateOlderTakeIsRefused() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, bob, holder) = (session(), session(), node())
      _ = try log.append(entry(frame(alice, 1), frame(bob, 1)), node: holder, stripe: 0, takes: 0)
      _ = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(try log.release(alice, epoch: 3, from: holder))
      #expect(try log.take(alice, epoch: 2, from: holder) == .refused(epoch: 3))
      #expect(
        try log.append(entry(frame(alice, 2), frame(bob, 2)), node: holder, stripe: 0, takes: 0)
          == .refused(takes: 1, taken: [alice: 3]))
      // Its first append under the count it learnt clears what it was told.
      #expect(try log.append(entry(frame(bob, 2)), node: holder, stripe: 0, takes: 1) == .appended(number: 1))
      _ = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      #expect(
        try log.append(entry(frame(bob, 3)), node: holder, stripe: 0, takes: 1) == .refused(takes: 2, taken: [bob: 2]))
    }

    @Test func aTrimPastTheLogsEndStopsAtItAndNumbersGoOn() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, holder) = (session(), node())
      _ = try log.append(entry(frame(alice, 1)), node: holder, stripe: 0, takes: 0)
      _ = try log.append(entry(frame(alice, 2)), node: holder, stripe: 0, takes: 0)
      #expect(
        try log.trim(node: holder, stripe: 0, keepFrom: 10, takes: 0, checkpoints: [:], onces: .init([]))
          == .trimmed(head: 2))
      #expect(try log.append(entry(frame(alice, 3)), node: holder, stripe: 0, takes: 0) == .appended(number: 2))
    }

    @Test func aSessionWhoseFramesWereTrimmedResumesFromItsCheckpointAndOnceKeys() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, holder) = (session(), node())
      _ = try log.append(
        entry(frame(alice, 1, once: "o1"), frame(alice, 2, once: "o2", letter: "7-1")), node: holder, stripe: 0,
        takes: 0)
      _ = try log.append(entry(frame(alice, 3, once: "o3")), node: holder, stripe: 0, takes: 0)
      #expect(
        try log.trim(
          node: holder, stripe: 0, keepFrom: 1, takes: 0,
          checkpoints: [alice: .init(last: 2, letterPosition: "7-1")],
          onces: .init([
            .init(session: alice, once: "o1"), .init(session: "other", once: "x"), .init(session: alice, once: "o2"),
          ])
        ) == .trimmed(head: 1))
      let got = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(got.frames == [frame(alice, 3, once: "o3")])
      #expect(got.last == 3 && got.letterPosition == "7-1" && got.onces == ["o1", "o2", "o3"])
      // The holder let the session go (its meta holds `last`): its checkpoint goes too.
      #expect(try log.release(alice, epoch: 2, from: holder))
      let after = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(after.last == 3 && after.letterPosition == nil)
    }

    @Test func aTrimKeepsOnlyTheNewestOnceKeyBlobs() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, holder) = (session(), node())
      for seq in UInt64(1)...6 {
        _ = try log.append(entry(frame(alice, seq, once: "o\(seq)")), node: holder, stripe: 0, takes: 0)
        _ = try log.trim(
          node: holder, stripe: 0, keepFrom: seq, takes: 0, checkpoints: [alice: .init(last: seq, letterPosition: nil)],
          onces: .init([.init(session: alice, once: "o\(seq)")]))
      }
      let got = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(got.onces == ["o3", "o4", "o5", "o6"] && got.last == 6 && got.frames.isEmpty)
    }

    @Test func aMalformedEntryOrCheckpointIsAnErrorNotACrash() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis)
      let (alice, bob, holder) = (session(), session(), node())
      let keys = WriteBehindLog.Keys(node: holder, stripe: 0)
      _ = try log.append(entry(frame(alice, 1)), node: holder, stripe: 0, takes: 0)
      try redis.command(["RPUSH", .string(keys.log), .bytes([1, 200])])
      #expect(throws: WriteBehindLogMalformed.truncated) { try log.take(alice, epoch: 2, from: holder) }
      let other = node()
      try redis.command(["HSET", .string(WriteBehindLog.Keys(node: other, stripe: 0).checkpoints), .string(bob), "x 1"])
      #expect(throws: WriteBehindLogMalformed.badCheckpoint("x 1")) { try log.take(bob, epoch: 2, from: other) }
    }

    @Test func aStripesKeysShareOneSlotAndSessionsSpreadOverStripes() throws {
      let keys = WriteBehindLog.Keys(node: "n-1", stripe: 3)
      let slots = Set([keys.log, keys.fence, keys.checkpoints, keys.onces].map { RedisSlot.of($0) })
      #expect(slots.count == 1)
      #expect(WriteBehindLog.Keys(node: "n-1", stripe: 2).log != keys.log)
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let log = log(redis, stripes: 4)
      let stripes = Set((0..<64).map { log.stripe(of: "s_\($0)") })
      #expect(stripes == [0, 1, 2, 3])
      // A take finds the session's stripe as the holder did.
      let (alice, holder) = (session(), node())
      _ = try log.append(entry(frame(alice, 1)), node: holder, stripe: log.stripe(of: alice), takes: 0)
      #expect(try #require(taken(try log.take(alice, epoch: 2, from: holder))).frames == [frame(alice, 1)])
    }
  }
}
