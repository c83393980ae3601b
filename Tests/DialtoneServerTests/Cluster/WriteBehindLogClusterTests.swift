import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Write-behind nodes whose batches go to their own log (`--write-behind-log-stripes`).
@Suite(.scratchPostgres, .scratchRedis, .serialized) struct WriteBehindLogClusterTests {
  /// The frames a node's log holds for a session, as text, from the stripe's entries (read
  /// without a take, which would fence the node).
  private func logged(_ cluster: TestCluster, node: String, _ session: String, stripes: Int) throws -> [String] {
    let redis = try cluster.connect()
    defer { redis.close() }
    let stripe = WriteBehindLog(redis, stripes: stripes, expiry: .seconds(60)).stripe(of: session)
    let reply = try redis.command(["LRANGE", .string(WriteBehindLog.Keys(node: node, stripe: stripe).log), "0", "-1"])
    var frames: [String] = []
    for bytes in (reply.elements ?? []).compactMap(\.bytes) {
      for frame in try WriteBehindLogEntry(decoding: bytes).frames where frame.session == session {
        frames.append(String(decoding: frame.bytes, as: UTF8.self))
      }
    }
    return frames
  }

  private func sessionLog(_ cluster: TestCluster, _ session: String) throws -> Int64 {
    let redis = try cluster.connect()
    defer { redis.close() }
    return try redis.command(["ZCARD", .string("dt:session:{\(session)}:log")]).integer ?? -1
  }

  @Test func relayedCandidatesAreStoredInTheHoldersLogAndTrimmedOnceAcknowledged() async throws {
    let stripes = 3
    let cluster = try await TestCluster.start(2) {
      $0.writeBehindSessions = true
      $0.writeBehindLogStripes = stripes
    }
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    let bobsNode = try #require(cluster.nodes[1].server.cluster?.thisNode)
    let before = try sessionLog(cluster, session)
    for n in 1...3 {
      #expect(try await alice.candidateFor(call, n).isAck)
    }
    try await bob.expectCandidates(1...3, from: lastSeq + 1)
    // His node stored them in its log, not in his session's keys.
    let stored = await eventually(within: 10) {
      let frames = (try? logged(cluster, node: bobsNode, session, stripes: stripes)) ?? []
      return (1...3).allSatisfy { n in frames.contains { $0.contains("candidate:\(n) ") } }
    }
    #expect(stored)
    #expect(try sessionLog(cluster, session) == before)
    // Once he acknowledges them, his node's housekeeping trims them from its log.
    bob.ack()
    let trimmed = await eventually(within: 10) {
      (try? logged(cluster, node: bobsNode, session, stripes: stripes))?.isEmpty == true
    }
    #expect(trimmed)
    await cluster.stop()
  }

  /// A cluster of write-behind nodes storing in their logs.
  private func logCluster(_ count: Int, stripes: Int = 8, _ more: (inout ServerConfiguration) -> Void = { _ in })
    async throws -> TestCluster
  {
    try await TestCluster.start(count) {
      $0.writeBehindSessions = true
      $0.writeBehindLogStripes = stripes
      more(&$0)
    }
  }

  private func meta(_ cluster: TestCluster, _ session: String, _ field: String) throws -> String? {
    let redis = try cluster.connect()
    defer { redis.close() }
    return try redis.command(["HGET", .string("dt:session:{\(session)}:meta"), .string(field)]).string
  }

  /// Bob's node stores three candidates in its log; he has read them, not acknowledged them.
  private func threeLoggedCandidates(_ cluster: TestCluster, stripes: Int = 8) async throws -> (
    alice: SignalingProbe, bob: SignalingProbe, call: CallID, session: String, lastSeq: UInt64, holder: String
  ) {
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    bob.ack()
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    let holder = try #require(cluster.nodes[1].server.cluster?.thisNode)
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    try await bob.expectCandidates(1...3, from: lastSeq + 1)
    let stored = await eventually(within: 10) {
      let frames = (try? logged(cluster, node: holder, session, stripes: stripes)) ?? []
      return (1...3).allSatisfy { n in frames.contains { $0.contains("candidate:\(n) ") } }
    }
    #expect(stored)
    return (alice, bob, call, session, lastSeq, holder)
  }

  /// Step 2: the holder dies with frames only its log has (its client read them, did not
  /// acknowledge them); the resume elsewhere takes them from its log and replays them, once, and
  /// what comes after follows them.
  @Test func aResumeAfterTheHoldersDeathReplaysWhatItsLogHeldOnceAndInOrder() async throws {
    let cluster = try await logCluster(3)
    let (alice, bob, call, session, lastSeq, _) = try await threeLoggedCandidates(cluster)
    await cluster.nodes[1].stop()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    #expect(try await alice.candidateFor(call, 4).isAck)
    try await back.expectCandidates(4...4, from: lastSeq + 4)
    try await back.expectQuiet()
    // Settled: the meta knows the last seq and no longer names a log to take from; the new
    // holder's log holds what it took, under its epoch, for the next resume.
    #expect(try meta(cluster, session, "from") == nil)
    let node = try #require(cluster.nodes[2].server.cluster?.thisNode)
    let restored = try logged(cluster, node: node, session, stripes: 8)
    for n in 1...3 { #expect(restored.filter { $0.contains("candidate:\(n) ") }.count == 1) }
    await cluster.stop()
  }

  /// A resume on the node that holds the session: it takes the session from its own log (which
  /// then refuses its older epoch's frames once), replays what its client lacks once, and goes on.
  @Test func aResumeOnTheHoldingNodeItselfReplaysFromItsOwnLogOnce() async throws {
    let cluster = try await logCluster(2)
    let (alice, bob, call, session, lastSeq, holder) = try await threeLoggedCandidates(cluster)
    bob.close()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq + 1, on: 1)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(2...3, from: lastSeq + 2)
    #expect(try await alice.candidateFor(call, 4).isAck)
    try await back.expectCandidates(4...4, from: lastSeq + 4)
    try await back.expectQuiet()
    // Its log holds candidate 4 once (appended after its own take), under the new epoch.
    let once = await eventually(within: 10) {
      ((try? logged(cluster, node: holder, session, stripes: 8)) ?? []).filter { $0.contains("candidate:4 ") }.count
        == 1
    }
    #expect(once)
    await cluster.stop()
  }

  /// A second resume after the first resumer died too: it takes from the first resumer's log
  /// what that one re-stored (the dead first holder's frames, under the first resume's epoch).
  @Test func aSecondResumeAfterTheFirstResumerDiedReplaysWhatTheFirstReStored() async throws {
    let cluster = try await logCluster(3)
    let (_, bob, _, session, lastSeq, _) = try await threeLoggedCandidates(cluster)
    await cluster.nodes[1].stop()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    await cluster.nodes[2].stop()
    _ = try await back.closeCode()
    let (again, second) = try await cluster.resume("bob", session, from: lastSeq + 1, on: 0)
    #expect(second.resumed && !second.resync)
    try await again.expectCandidates(2...3, from: lastSeq + 2)
    try await again.expectQuiet()
    await cluster.stop()
  }

  /// A move: Bob resumes on another node while his first node lives. The take fences that
  /// node's log: what it appends for Bob under the epoch it held him at is refused, so its log
  /// never holds a frame of his after the take (a later take could otherwise read one twice).
  @Test func aMoveFencesTheOldHoldersAppendsForThatSession() async throws {
    let cluster = try await logCluster(3)
    let (_, bob, _, session, lastSeq, holder) = try await threeLoggedCandidates(cluster)
    let epoch = try #require(try meta(cluster, session, "epoch").flatMap { UInt64($0) })
    bob.close()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    let oldStore = try #require(cluster.nodes[1].server.cluster?.writeBehind?.logStore)
    let redis = try cluster.connect()
    defer { redis.close() }
    let late = WriteBehindBatch(
      number: 99,
      sessions: [.init(id: session, epoch: epoch, frames: [.init(seq: lastSeq + 4, bytes: Array("late".utf8))])])
    #expect(try oldStore.store(late, on: redis, held: { _ in false }) == [session: .superseded])
    #expect(try logged(cluster, node: holder, session, stripes: 8).allSatisfy { !$0.contains("late") })
    try await back.expectQuiet()
    await cluster.stop()
  }

  /// R1 and R2 racing: R1 (the test, in Redis) resumed Bob's session and died before taking his
  /// dead node's log; R2 (a node) resumes it then, takes from the dead node (`from` still names
  /// it) and from R1, replays everything, clears `from`; R1's take arriving late is refused.
  @Test func aResumeRacingAnEarlierOneThatHadNotTakenTheLogReplaysEverythingAndFencesIt() async throws {
    let cluster = try await logCluster(2)
    let (alice, bob, call, session, lastSeq, holder) = try await threeLoggedCandidates(cluster)
    await cluster.nodes[1].stop()
    _ = try await bob.closeCode()
    let redis = try cluster.connect()
    defer { redis.close() }
    let r1 = "n-" + UUID().uuidString
    let limits = SessionLedger.Limits(expiry: .seconds(60))
    guard
      case .resumed(let first) = try SessionLedger(redis, limits: limits).resumeHolding(
        session, userId: "bob", deviceId: "phone", from: lastSeq, node: r1, allowingAhead: 8, logged: true)
    else {
      Issue.record("not resumed by R1")
      return
    }
    #expect(first.logged?.from?.node == holder && first.logged?.previousOwner == holder)
    #expect(try meta(cluster, session, "from")?.hasPrefix(holder + " ") == true)
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 0)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    #expect(try meta(cluster, session, "from") == nil)
    // R1's take lands now: refused (R2's, at a later epoch, was there first, released or not).
    let log = WriteBehindLog(redis, stripes: 8, expiry: .seconds(60))
    guard case .refused = try log.take(session, epoch: first.epoch, from: holder) else {
      Issue.record("R1's late take was not refused")
      return
    }
    #expect(try await alice.candidateFor(call, 4).isAck)
    try await back.expectCandidates(4...4, from: lastSeq + 4)
    try await back.expectQuiet()
    await cluster.stop()
  }

  /// Step 3: a session that ends (its resume window passed) lets its holder's stripe go of it:
  /// the checkpoint its trim wrote is removed.
  @Test func aSessionsEndReleasesItsCheckpointInTheHoldersLog() async throws {
    let cluster = try await logCluster(2)
    let (_, bob, _, session, _, holder) = try await threeLoggedCandidates(cluster)
    let stripe = RedisSlot.of(session) % 8
    let checkpoints = WriteBehindLog.Keys(node: holder, stripe: stripe).checkpoints
    func checkpoint() -> String? {
      guard let redis = try? cluster.connect() else { return nil }
      defer { redis.close() }
      return try? redis.command(["HGET", .string(checkpoints), .string(session)]).string
    }
    bob.ack()
    let written = await eventually(within: 10) { checkpoint() != nil }
    #expect(written)
    bob.close()
    _ = try await bob.closeCode()
    // His resume window passes (the node's clock is virtual).
    #expect(await cluster.nodes[1].clock.waitForTimer(dueIn: 60))
    cluster.nodes[1].clock.advance(by: 61)
    let ended = await eventually(within: 10) { (try? meta(cluster, session, "epoch")) == .some(nil) }
    #expect(ended)
    let released = await eventually(within: 10) { checkpoint() == nil }
    #expect(released, "checkpoint \(checkpoint() ?? "none")")
    await cluster.stop()
  }
}
