import DialtoneCluster
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

/// When the holder's book of its node log lets a trim drop an entry, without Redis.
@Suite struct WriteBehindLogBookTests {
  typealias Frame = WriteBehindLogEntry.Frame

  private func frame(_ session: String, _ seq: UInt64, once: String? = nil, letter: String? = nil) -> Frame {
    Frame(session: session, epoch: 1, seq: seq, bytes: [1], once: once, letterPosition: letter)
  }

  @Test func aTrimStopsAtTheFirstEntryHoldingAFrameItsClientHasNotAcknowledged() {
    var book = WriteBehindLogBook()
    book.appended(.init(frames: [frame("a", 1, once: "o1", letter: "7-0"), frame("b", 1)]), stripe: 0, number: 0)
    book.appended(.init(frames: [frame("a", 2), frame("b", 2)]), stripe: 0, number: 1)
    book.appended(.init(frames: [frame("a", 3)]), stripe: 0, number: 2)
    // Nothing acknowledged: a trim that drops nothing (it renews the stripe's expiry).
    let renewal = book.trims(held: { _ in true })
    #expect(renewal.map(\.keepFrom) == [0] && renewal.allSatisfy { $0.checkpoints.isEmpty && $0.onces.pairs.isEmpty })
    book.acknowledge("a", through: 3)
    book.acknowledge("b", through: 1)
    let trims = book.trims(held: { _ in true })
    #expect(trims.count == 1)
    let trim = trims[0]
    // b's seq 2 in entry 1 is not acknowledged: only entry 0 goes.
    #expect(trim.keepFrom == 1 && trim.stripe == 0)
    #expect(trim.checkpoints == ["a": .init(last: 1, letterPosition: "7-0"), "b": .init(last: 1, letterPosition: nil)])
    #expect(trim.onces.pairs == [.init(session: "a", once: "o1")])
    book.trimmed(trim, head: 1)
    #expect(book.entryCount == 2)
    // The next trim keeps a's letter position though its frames carry none.
    book.acknowledge("b", through: 2)
    let next = book.trims(held: { _ in true })
    #expect(next.first?.keepFrom == 3)
    #expect(next.first?.checkpoints["a"] == .init(last: 3, letterPosition: "7-0"))
  }

  @Test func framesOfASessionNoLongerHeldKeepNoEntry() {
    var book = WriteBehindLogBook()
    book.appended(.init(frames: [frame("a", 1), frame("b", 1)]), stripe: 3, number: 10)
    book.acknowledge("a", through: 1)
    #expect(book.trims(held: { _ in true }).first?.keepFrom == 10)
    #expect(book.trims(held: { $0 == "a" }).first?.keepFrom == 11)
  }

  /// A session that ended (its checkpoint released) while entries still held its frames: the
  /// trim that drops them writes no checkpoint or once-key of it again.
  @Test func aTrimWritesNothingOfASessionThatEnded() throws {
    var book = WriteBehindLogBook()
    book.appended(.init(frames: [frame("a", 1, once: "oa"), frame("b", 1, once: "ob")]), stripe: 0, number: 0)
    book.acknowledge("b", through: 1)
    book.end("a")
    let trim = try #require(book.trims(held: { $0 == "b" }).first)
    #expect(trim.keepFrom == 1)
    #expect(trim.checkpoints == ["b": .init(last: 1, letterPosition: nil)])
    #expect(trim.onces.pairs == [.init(session: "b", once: "ob")])
    book.trimmed(trim, head: 1)
    #expect(book.entryCount == 0)
  }

  @Test func aTakeLearntFromARefusalSupersedesOnlyOlderEpochs() {
    var book = WriteBehindLogBook()
    book.refused(stripe: 2, takes: 3, taken: ["a": 5])
    #expect(book.takes(of: 2) == 3 && book.takes(of: 1) == 0)
    #expect(book.superseded("a", epoch: 4))
    #expect(!book.superseded("a", epoch: 5) && !book.superseded("b", epoch: 1))
    book.forget("a")
    #expect(!book.superseded("a", epoch: 4))
  }
}

extension RedisTests {
  /// The holder's batches in its node log (`WriteBehindLogStore`) on a real redis-server (and on
  /// a Redis Cluster with `DIALTONE_TEST_REDIS=cluster`): what a resume takes after the holder's
  /// death, an append after a take, and the trim by acknowledgements.
  @Suite struct WriteBehindLogStoreBehaviour {
    typealias Refusal = WriteBehindBatch.Refusal

    private func session() -> String { "s_" + UUID().uuidString }
    private func node() -> String { "n-" + UUID().uuidString }

    private func bytes(_ session: String, _ seq: UInt64) -> [UInt8] {
      Array(#"{"seq":\#(seq),"s":"\#(session)"}"#.utf8)
    }

    /// A batch of `seqs` per session, all under `epoch` unless `epochs` says otherwise.
    private func batch(
      _ number: UInt64, _ frames: [(String, ClosedRange<UInt64>)], epochs: [String: UInt64] = [:],
      letters: [String: String] = [:]
    ) -> WriteBehindBatch {
      WriteBehindBatch(
        number: number,
        sessions: frames.map { session, seqs in
          .init(
            id: session, epoch: epochs[session] ?? 1,
            frames: seqs.map { .init(seq: $0, bytes: bytes(session, $0), once: "o\($0)") },
            letterPosition: letters[session])
        })
    }

    private func taken(_ result: WriteBehindLog.Taken) -> WriteBehindLogTaken? {
      if case .taken(let taken) = result { return taken }
      Issue.record("not taken: \(result)")
      return nil
    }

    private func length(_ redis: any RedisClient, _ holder: String, stripe: Int) throws -> Int64? {
      try redis.command(["LLEN", .string(WriteBehindLog.Keys(node: holder, stripe: stripe).log)]).integer
    }

    @Test func aResumeAfterTheHoldersDeathTakesExactlyItsFramesFromTheLog() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let (alice, bob, carol, holder) = (session(), session(), session(), node())
      let store = WriteBehindLogStore(node: holder, stripes: 4, expiry: .seconds(60))
      #expect(try store.store(batch(1, [(alice, 1...2), (bob, 1...1)]), on: redis, held: { _ in true }).isEmpty)
      #expect(
        try store.store(
          batch(2, [(bob, 2...3), (carol, 1...1), (alice, 3...3)], letters: [alice: "9-1"]), on: redis,
          held: { _ in true }
        ).isEmpty)
      // A batch whose reply was lost is sent again: its frames are stored twice.
      #expect(try store.store(batch(3, [(alice, 4...5)]), on: redis, held: { _ in true }).isEmpty)
      #expect(try store.store(batch(3, [(alice, 4...5)]), on: redis, held: { _ in true }).isEmpty)
      // The holder dies; another node moved alice's epoch to 2 and takes her from its log.
      let log = WriteBehindLog(redis, stripes: 4, expiry: .seconds(60))
      let got = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(got.frames.map(\.seq) == [1, 2, 3, 4, 5])
      #expect(got.frames.map(\.bytes) == (1...5).map { bytes(alice, $0) })
      #expect(got.frames.allSatisfy { $0.session == alice && $0.epoch == 1 })
      #expect(got.last == 5 && got.letterPosition == "9-1")
      // The batch stored twice lists its once-keys twice: a set of them, for a new holder.
      #expect(Set(got.onces) == ["o1", "o2", "o3", "o4", "o5"])
      let bobs = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      #expect(bobs.frames.map(\.seq) == [1, 2, 3] && bobs.last == 3)
    }

    /// A batch over several stripes costs the sender one round trip, not one per stripe; a stripe
    /// refused for a take goes again alone.
    @Test func aBatchOverSeveralStripesIsAppendedInOneRoundTrip() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      try redis.load(WriteBehindLog.scripts)
      let counting = CountingRedis(redis)
      let holder = node()
      let store = WriteBehindLogStore(node: holder, stripes: 8, expiry: .seconds(60))
      let log = WriteBehindLog(redis, stripes: 8, expiry: .seconds(60))
      // Sessions in at least three stripes, and two sharing one.
      var byStripe: [Int: [String]] = [:]
      while byStripe.count < 3 || !byStripe.values.contains(where: { $0.count >= 2 }) {
        let id = session()
        byStripe[log.stripe(of: id), default: []].append(id)
      }
      let shared = try #require(byStripe.first { $0.value.count >= 2 })
      let (taken, beside) = (shared.value[0], shared.value[1])
      let sessions = byStripe.values.flatMap { $0 }
      #expect(try store.store(batch(1, sessions.map { ($0, 1...2) }), on: counting, held: { _ in true }).isEmpty)
      #expect(counting.pipelines == 1 && counting.commands == 0)
      // A take of one session: its stripe is refused and goes again without it; the others once.
      _ = try #require(self.taken(try log.take(taken, epoch: 2, from: holder)))
      #expect(
        try store.store(batch(2, sessions.map { ($0, 3...3) }), on: counting, held: { _ in true }) == [
          taken: .superseded
        ])
      #expect(counting.pipelines == 3 && counting.commands == 0)
      for id in sessions where id != taken {
        let got = try #require(self.taken(try log.take(id, epoch: 2, from: holder)))
        #expect(got.frames.map(\.seq) == [1, 2, 3], "\(id == beside ? "beside the taken session" : "elsewhere")")
      }
    }

    /// Bob's session resumed by `node` with the node log (the script's half), nil if not resumed.
    private func resumedLogged(_ ledger: SessionLedger, _ bob: String, from seq: UInt64, on node: String) throws
      -> SessionLedger.HeldResumption?
    {
      let result = try ledger.resumeHolding(
        bob, userId: "bob", deviceId: "phone", from: seq, node: node, allowingAhead: 8, logged: true)
      if case .resumed(let resumed) = result { return resumed }
      Issue.record("not resumed on \(node): \(result)")
      return nil
    }

    /// Bob's session opened on `holder` and claimed write-behind, on one Redis even where the suite
    /// runs on a Redis Cluster: a write-behind resume reads two nodes' inboxes
    /// (`SessionLedger.resumeHolding` refuses a cluster).
    private func claimedOnOneRedis() throws -> (
      redis: any RedisClient, ledger: SessionLedger, bob: String, holder: String, epoch: UInt64
    ) {
      let redis = try SharedRedis.server().connect(commandTimeout: .seconds(5))
      let (bob, holder) = (session(), node())
      let limits = SessionLedger.Limits(expiry: .seconds(60))
      let ledger = SessionLedger(redis, limits: limits)
      let epoch = try ledger.open(bob, userId: "bob", deviceId: "phone", node: holder)
      #expect(try WriteBehindStore(redis, limits: limits).claim(bob, epoch: epoch) != nil)
      return (redis, ledger, bob, holder, epoch)
    }

    /// A letter the dead holder stored in its log but had not trimmed from its inbox (a `hold`,
    /// which no once-key catches): the first resume drops it (at or before the take's letter
    /// position), and its settle moves the session's `lp` past the copy it made, so the next
    /// resume (the first resumer died before its inbox let the copy go) does not apply it.
    @Test func aLetterTheHolderStoredIsDroppedByEveryLaterResume() throws {
      let (redis, ledger, bob, holder, epoch) = try claimedOnOneRedis()
      defer { redis.close() }
      let (r1, r2) = (node(), node())
      let hold = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"hold"}"#.utf8))
      _ = try ledger.append(hold, to: bob, from: node())
      let position = try #require(
        try redis.command(["XRANGE", .string("dt:inbox:{\(holder)}"), "-", "+"]).elements?.last?.elements?.first?
          .string)
      let store = WriteBehindLogStore(node: holder, stripes: 4, expiry: .seconds(60))
      let stored = WriteBehindBatch(
        number: 1,
        sessions: [
          .init(id: bob, epoch: epoch, frames: [.init(seq: 1, bytes: hold.bytes(seq: 1))], letterPosition: position)
        ])
      #expect(try store.store(stored, on: redis, held: { _ in true }).isEmpty)
      // Bob processed it (seq 1). R1 resumes him, R2 after R1's death.
      for resumer in [r1, r2] {
        let resumed = try #require(try resumedLogged(ledger, bob, from: 1, on: resumer))
        let logStore = WriteBehindLogStore(node: resumer, stripes: 4, expiry: .seconds(60))
        guard
          case .resumed(let held) = try logStore.resume(
            bob, resumed, client: 1, ahead: 8, capacity: 64, ledger: ledger)
        else {
          Issue.record("not resumed from the log on \(resumer)")
          return
        }
        #expect(held.letters.isEmpty && held.pending.isEmpty && held.lastSeq == 1)
      }
    }

    /// A resume overtaken by another between its script and its settle (R2's script moved the
    /// epoch while R1 took and re-stored) is superseded, not held: the meta is R2's.
    @Test func aResumeOvertakenBeforeItsSettleIsSupersededNotHeld() throws {
      let (redis, ledger, bob, holder, epoch) = try claimedOnOneRedis()
      defer { redis.close() }
      let (r1, r2) = (node(), node())
      let store = WriteBehindLogStore(node: holder, stripes: 4, expiry: .seconds(60))
      let frame = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"candidate"}"#.utf8))
      let stored = WriteBehindBatch(
        number: 1, sessions: [.init(id: bob, epoch: epoch, frames: [.init(seq: 1, bytes: frame.bytes(seq: 1))])])
      #expect(try store.store(stored, on: redis, held: { _ in true }).isEmpty)
      let first = try #require(try resumedLogged(ledger, bob, from: 0, on: r1))
      _ = try #require(try resumedLogged(ledger, bob, from: 0, on: r2))
      let r1Store = WriteBehindLogStore(node: r1, stripes: 4, expiry: .seconds(60))
      #expect(try r1Store.resume(bob, first, client: 0, ahead: 8, capacity: 64, ledger: ledger) == .superseded)
      #expect(try redis.command(["HGET", .string("dt:session:{\(bob)}:meta"), "owner"]).string == r2)
    }

    /// The session's letter index is trimmed by count (its holder's log never moves `lp`), the
    /// newest position dropped kept as `lxcut`: a resume whose previous holder had not stored
    /// through it resyncs, since letters were lost.
    @Test func theLetterIndexIsTrimmedByCountAndAResumeBehindItsCutResyncs() throws {
      // One Redis even where the suite runs on a Redis Cluster: a write-behind resume reads two
      // nodes' inboxes (`SessionLedger.resumeHolding` refuses a cluster).
      let redis = try SharedRedis.server().connect(commandTimeout: .seconds(5))
      defer { redis.close() }
      let (bob, holder, resumer) = (session(), node(), node())
      let limits = SessionLedger.Limits(capacity: 4, expiry: .seconds(60))
      let ledger = SessionLedger(redis, limits: limits)
      let epoch = try ledger.open(bob, userId: "bob", deviceId: "phone", node: holder)
      #expect(try WriteBehindStore(redis, limits: limits).claim(bob, epoch: epoch) != nil)
      let letter = SessionLedger.Frame(head: Array(#"{"seq":"#.utf8), tail: Array(#","type":"hold"}"#.utf8))
      for _ in 1...69 { _ = try ledger.append(letter, to: bob, from: node()) }
      let positions = try #require(
        try redis.command(["XRANGE", .string("dt:inbox:{\(holder)}"), "-", "+"]).elements?.compactMap {
          $0.elements?.first?.string
        })
      #expect(positions.count == 69)
      let index = try redis.command(["LRANGE", .string("dt:session:{\(bob)}:lx"), "0", "-1"]).elements?.compactMap(
        \.string)
      #expect(index == Array(positions.suffix(4)))
      let resumed = try #require(try resumedLogged(ledger, bob, from: 0, on: resumer))
      #expect(resumed.logged?.letterCut == positions[64] && resumed.letters.count == 4)
      let store = WriteBehindLogStore(node: resumer, stripes: 4, expiry: .seconds(60))
      #expect(try store.resume(bob, resumed, client: 0, ahead: 8, capacity: 4, ledger: ledger) == .resync)
    }

    @Test func anAppendAfterATakeIsRefusedAndTheHolderDropsThatSessionOnly() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let (alice, bob, holder) = (session(), session(), node())
      // One stripe: both sessions' frames share its entries.
      let store = WriteBehindLogStore(node: holder, stripes: 1, expiry: .seconds(60))
      _ = try store.store(batch(1, [(alice, 1...1), (bob, 1...1)]), on: redis, held: { _ in true })
      let log = WriteBehindLog(redis, stripes: 1, expiry: .seconds(60))
      _ = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(
        try store.store(batch(2, [(alice, 2...2), (bob, 2...3)]), on: redis, held: { _ in true }) == [
          alice: .superseded
        ])
      // Bob's frames went in again under the new take count; nothing of alice's after the take.
      let bobs = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      #expect(bobs.frames.map(\.seq) == [1, 2, 3])
      let alices = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(alices.frames.map(\.seq) == [1])
      // A session resumed on this node at a later epoch than its taker's is its own again.
      #expect(
        try store.store(batch(3, [(alice, 2...2)], epochs: [alice: 4]), on: redis, held: { _ in true }).isEmpty)
    }

    @Test func aTakeLearntFromAnotherSessionsRefusalStillDropsTheTakenOneLater() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let (alice, bob, carol, holder) = (session(), session(), session(), node())
      let store = WriteBehindLogStore(node: holder, stripes: 1, expiry: .seconds(60))
      _ = try store.store(batch(1, [(alice, 1...1), (bob, 1...1), (carol, 1...1)]), on: redis, held: { _ in true })
      let log = WriteBehindLog(redis, stripes: 1, expiry: .seconds(60))
      _ = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      _ = try #require(taken(try log.take(bob, epoch: 2, from: holder)))
      // Only bob is in this batch: the refusal names alice too, and carol's frames go in.
      #expect(
        try store.store(batch(2, [(bob, 2...2), (carol, 2...2)]), on: redis, held: { _ in true }) == [
          bob: .superseded
        ])
      // Redis would take alice's frames under the take count the holder learnt: the holder refuses
      // them itself.
      #expect(
        try store.store(batch(3, [(alice, 2...2), (carol, 3...3)]), on: redis, held: { _ in true }) == [
          alice: .superseded
        ])
      let alices = try #require(taken(try log.take(alice, epoch: 3, from: holder)))
      #expect(alices.frames.map(\.seq) == [1])
      let carols = try #require(taken(try log.take(carol, epoch: 2, from: holder)))
      #expect(carols.frames.map(\.seq) == [1, 2, 3])
    }

    @Test func theTrimByAcknowledgementsBoundsTheStripe() throws {
      let redis = try SharedRedis.client()
      defer { redis.close() }
      let (alice, bob, holder) = (session(), session(), node())
      let store = WriteBehindLogStore(node: holder, stripes: 1, expiry: .seconds(60))
      for seq in UInt64(1)...10 {
        _ = try store.store(
          batch(seq, [(alice, seq...seq), (bob, seq...seq)], letters: seq == 4 ? [alice: "3-0"] : [:]), on: redis,
          held: { _ in true })
      }
      #expect(try length(redis, holder, stripe: 0) == 10)
      // Nothing acknowledged: nothing goes, but the stripe's keys live on (an append sets the
      // log's expiry only when it creates the log).
      let keys = WriteBehindLog.Keys(node: holder, stripe: 0)
      try redis.command(["PEXPIRE", .string(keys.log), "5000"])
      #expect(try store.trim(on: redis, held: { _ in true }) == 0)
      #expect(try redis.command(["PTTL", .string(keys.log)]).integer ?? 0 > 5000)
      store.acknowledge(alice, through: 10)
      store.acknowledge(bob, through: 6)
      // One trim for the stripe: up to bob's first unacknowledged frame (seq 7, entry 6).
      #expect(try store.trim(on: redis, held: { _ in true }) == 6)
      #expect(try length(redis, holder, stripe: 0) == 4 && store.entriesKept == 4)
      store.acknowledge(bob, through: 10)
      #expect(try store.trim(on: redis, held: { _ in true }) == 4)
      #expect(try length(redis, holder, stripe: 0) ?? 0 == 0)
      // What a resume then finds: the checkpoint and the once-keys the trims kept.
      let log = WriteBehindLog(redis, stripes: 1, expiry: .seconds(60))
      let got = try #require(taken(try log.take(alice, epoch: 2, from: holder)))
      #expect(got.frames.isEmpty && got.last == 10 && got.letterPosition == "3-0")
      #expect(Set(got.onces) == Set((1...10).map { "o\($0)" }))
    }
  }
}

/// A Redis client that counts the round trips asked of it (commands and pipelines) and passes
/// them on.
final class CountingRedis: RedisClient, @unchecked Sendable {
  // @unchecked: the counters are read by the test after the calls it made return, on its thread.
  private let base: any RedisClient
  private(set) var commands = 0
  private(set) var pipelines = 0

  init(_ base: any RedisClient) { self.base = base }

  var configuration: RedisConfiguration { base.configuration }
  var isCluster: Bool { base.isCluster }
  var isOpen: Bool { base.isOpen }

  func command(_ arguments: [RedisArgument]) throws(RedisError) -> RedisReply {
    commands += 1
    return try base.command(arguments)
  }

  func pipeline(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    pipelines += 1
    return try base.pipeline(commands)
  }

  func transaction(_ commands: [[RedisArgument]]) throws(RedisError) -> [RedisReply] {
    try base.transaction(commands)
  }

  func load(_ scripts: [RedisScript]) throws(RedisError) { try base.load(scripts) }
  func close() { base.close() }
}
