import DialtoneCalls
import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneStorage
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// A cluster whose nodes run `--cluster-sessions write-behind`.
private func writeBehindCluster(_ count: Int = 3) async throws -> TestCluster {
  try await TestCluster.start(count) { $0.writeBehindSessions = true }
}

/// The frames Redis holds in a session's log, as text.
private func logged(_ cluster: TestCluster, _ session: String) throws -> [String] {
  let redis = try cluster.connect()
  defer { redis.close() }
  let reply = try redis.command(["ZRANGE", .string("dt:session:{\(session)}:log"), "0", "-1"])
  return (reply.elements ?? []).compactMap { $0.bytes.map { String(decoding: $0, as: UTF8.self) } }
}

/// A node's inbox in Redis (every entry's fields), as text.
private func inboxText(_ cluster: TestCluster, _ node: String) throws -> String {
  let redis = try cluster.connect()
  defer { redis.close() }
  let reply = try redis.command(["XRANGE", .string("dt:inbox:{\(node)}"), "-", "+"])
  func text(_ reply: RedisReply) -> String {
    if let bytes = reply.bytes { return String(decoding: bytes, as: UTF8.self) }
    return (reply.elements ?? []).map(text).joined(separator: " ")
  }
  return text(reply)
}

private func hasCandidate(_ frames: [String], _ n: Int) -> Bool {
  frames.contains { $0.contains(#""type":"candidate""#) && $0.contains("candidate:\(n) ") }
}

@Suite(.scratchPostgres, .scratchRedis, .serialized) struct WriteBehindClusterTests {
  @Test func aRelayedCandidateReachesThePeerOnAnotherNodeAndIsStoredForAResumeElsewhere() async throws {
    let cluster = try await writeBehindCluster()
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    bob.ack()
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    // Alice's node leaves each candidate unnumbered in Bob's node's inbox; his node numbers it,
    // writes it, and stores it after.
    let bobsNode = try #require(cluster.nodes[1].server.cluster?.thisNode)
    for n in 1...3 {
      // Alice's ack has no seq, and comes only once the copy is in Redis: in Bob's node's inbox,
      // or already stored in his session by his node.
      let id = "cand-\(n)"
      alice.send(ClientEnvelope(id: id, message: .candidate(.init(callId: call, candidate: candidate(n)))))
      let answer = try await alice.next("the ack to \(id)")
      #expect(answer.message.replyTo == id && answer.message.isAck && answer.seq == nil)
      let (inbox, log) = (try inboxText(cluster, bobsNode), try logged(cluster, session))
      #expect(inbox.contains("candidate:\(n) ") || hasCandidate(log, n))
    }
    try await bob.expectCandidates(1...3, from: lastSeq + 1)
    let stored = await eventually(within: 10) {
      (try? logged(cluster, session)).map { f in hasCandidate(f, 3) } == true
    }
    #expect(stored)
    // Bob drops without acknowledging them and resumes on the third node: they are replayed.
    bob.close()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    // And what Alice sends now reaches him there, numbered by his new node.
    #expect(try await alice.candidateFor(call, 4).isAck)
    let fourth = try await back.next()
    #expect(fourth.seq == lastSeq + 4)
    try await back.expectQuiet()
    await cluster.stop()
  }

  @Test func anAnswerIsWrittenOnlyOnceWhatItsRequestCausedIsStored() async throws {
    let cluster = try await writeBehindCluster(1)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 0)
    let session = try #require(bob.sessionId)
    let aliceSession = try #require(alice.sessionId)
    let (aliceLog, aliceSeq) = (try logged(cluster, aliceSession), alice.lastSeq)
    for n in 1...5 {
      // The moment Alice reads her ack, Bob's copy is in Redis (it was written to him at once).
      let id = "cand-\(n)"
      alice.send(ClientEnvelope(id: id, message: .candidate(.init(callId: call, candidate: candidate(n)))))
      let answer = try await alice.next("the ack to \(id)")
      #expect(answer.message.replyTo == id && answer.message.isAck)
      #expect(hasCandidate(try logged(cluster, session), n))
      // Her ack has no seq: it is not in her session's stream, nor remembered in Redis.
      #expect(answer.seq == nil)
      _ = try await bob.expect(.candidate)
    }
    #expect(alice.lastSeq == aliceSeq)
    #expect(try logged(cluster, aliceSession) == aliceLog)
    let redis = try cluster.connect()
    defer { redis.close() }
    for n in 1...5 {
      let kept = try redis.command(["HEXISTS", .string("dt:session:{\(aliceSession)}:replies"), .string("cand-\(n)")])
      #expect(kept.integer == 0)
    }
    await cluster.stop()
  }

  /// Bob is held by another node: Alice's node leaves his copy in that node's inbox with a Redis
  /// step on its sender, and her ack, without a seq, waits behind that step there.
  @Test func anAckToACandidateForAPeerOnAnotherNodeWaitsForTheStepLeavingItsCopy() async throws {
    let cluster = try await writeBehindCluster(2)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let link = try #require(cluster.nodes[0].server.cluster)
    let held = HeldSender(link)
    alice.send(ClientEnvelope(id: "held", message: .candidate(.init(callId: call, candidate: candidate(1)))))
    // The hub handled it: the step leaving Bob's copy, and the ack behind it, wait on the sender.
    let waiting = await eventually(within: 10) { link.sender.queued >= 2 }
    #expect(waiting)
    #expect(!alice.hasUnread)
    held.open()
    let answer = try await alice.next("the ack")
    #expect(answer.message.replyTo == "held" && answer.message.isAck && answer.seq == nil)
    _ = try await bob.expect(.candidate)
    await cluster.stop()
  }

  /// Three nodes: the call runs on Alice's first node, she resumed on the third, Bob is on the
  /// second. Bob's candidate is forwarded to the call's node, which leaves Alice's copy in her
  /// node's inbox with a step on its sender; Bob's ack goes back in a letter behind that step,
  /// without a seq, and his node writes it as it is: not in his session's stream, not in Redis.
  /// With the call's node's sender held nothing reaches him (with the letter sent before the
  /// copy's step, or the ack stored as before, this test fails).
  @Test func aForwardedCandidatesAckHasNoSeqAndWaitsForTheStepLeavingItsCopyOnTheCallsNode() async throws {
    let cluster = try await writeBehindCluster(3)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let (aliceSession, bobSession) = (try #require(alice.sessionId), try #require(bob.sessionId))
    let callsNode = try #require(cluster.nodes[0].server.cluster)
    let alicesNode = try #require(cluster.nodes[2].server.cluster?.thisNode)
    alice.close()
    _ = try await alice.closeCode()
    let (back, welcome) = try await cluster.resume("alice", aliceSession, from: alice.lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    let moved = await eventually(within: 10) { callsNode.writeBehind?.holds(aliceSession) == false }
    #expect(moved)
    #expect(try await bob.candidateFor(call, 1).isAck)
    _ = try await back.expect(.candidate)
    let held = HeldSender(callsNode)
    // The hold is on: what the call's node's sender had queued before it has run.
    let holding = await eventually(within: 10) { callsNode.sender.queued == 0 }
    #expect(holding)
    bob.send(ClientEnvelope(id: "far", message: .candidate(.init(callId: call, candidate: candidate(2)))))
    // The call's node handled it: the step leaving Alice's copy, and the letter with Bob's ack
    // behind it, wait on its sender; his node answers his ping meanwhile, and nothing else.
    let waiting = await eventually(within: 10) { callsNode.sender.queued >= 1 }
    #expect(waiting)
    try await bob.expectQuiet()
    let (bobLog, bobSeq) = (try logged(cluster, bobSession), bob.lastSeq)
    held.open()
    let answer = try await bob.next("the ack")
    #expect(answer.message.replyTo == "far" && answer.message.isAck && answer.seq == nil)
    // The moment Bob reads it, Alice's copy is in her node's inbox, or stored by her node.
    #expect(
      try inboxText(cluster, alicesNode).contains("candidate:2 ") || hasCandidate(try logged(cluster, aliceSession), 2))
    _ = try await back.expect(.candidate)
    // Bob's stream did not move for it, and Redis does not remember it.
    #expect(bob.lastSeq == bobSeq)
    #expect(try logged(cluster, bobSession) == bobLog)
    let redis = try cluster.connect()
    defer { redis.close() }
    let kept = try redis.command(["HEXISTS", .string("dt:session:{\(bobSession)}:replies"), "far"])
    #expect(kept.integer == 0)
    await cluster.stop()
  }

  /// Bob's node dies after Alice's candidate was stored in his session; he resumes on another
  /// node, and she sends the same candidate again with the same id. It is acked afresh, without a
  /// seq, and his session has it once: he does not get it again.
  @Test func theSameCandidateSentAgainAfterThePeersNodeDiedIsAckedAndNotStoredTwice() async throws {
    let cluster = try await writeBehindCluster(3)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let bobSession = try #require(bob.sessionId)
    let message = ClientMessage.candidate(.init(callId: call, candidate: candidate(1)))
    alice.send(ClientEnvelope(id: "again", message: message))
    let first = try await alice.next("the first ack")
    #expect(first.message.replyTo == "again" && first.seq == nil)
    _ = try await bob.expect(.candidate)
    let stored = await eventually(within: 10) { (try? logged(cluster, bobSession)).map { hasCandidate($0, 1) } == true }
    #expect(stored)
    await cluster.nodes[1].stop()
    _ = try await bob.closeCode()
    let (back, welcome) = try await cluster.resume("bob", bobSession, from: bob.lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    alice.send(ClientEnvelope(id: "again", message: message))
    let second = try await alice.next("the second ack")
    #expect(second.message.replyTo == "again" && second.message.isAck && second.seq == nil)
    try await back.expectQuiet()
    // His resume dropped what he had processed from the log (the copy among it): a copy stored
    // again would be there now.
    #expect(try logged(cluster, bobSession).filter { hasCandidate([$0], 1) }.isEmpty)
    for (index, node) in cluster.nodes.enumerated() where index != 1 { await node.stop() }
  }

  /// Alice's node dies after her candidate's copy was stored: she resumes on another node and
  /// sends the same candidate again, with the same id. It is acked without a seq (the call's
  /// take-over routes the request through the node that runs the call now, her new node, which
  /// answers it as its own), and Bob's session has it once.
  @Test func theSameCandidateSentAgainAfterANodesDeathIsAckedAndNotStoredTwice() async throws {
    let cluster = try await writeBehindCluster(3)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let (aliceSession, bobSession) = (try #require(alice.sessionId), try #require(bob.sessionId))
    let message = ClientMessage.candidate(.init(callId: call, candidate: candidate(1)))
    alice.send(ClientEnvelope(id: "again", message: message))
    let first = try await alice.next("the first ack")
    #expect(first.message.replyTo == "again" && first.seq == nil)
    _ = try await bob.expect(.candidate)
    await cluster.nodes[0].stop()
    _ = try await alice.closeCode()
    let (back, welcome) = try await cluster.resume("alice", aliceSession, from: alice.lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    back.send(ClientEnvelope(id: "again", message: message))
    // (The call's take-over may send her what it sends every session of the call first.)
    var second = try await back.next("the second ack")
    for _ in 0..<8 where second.message.replyTo != "again" { second = try await back.next("the second ack") }
    #expect(second.message.replyTo == "again" && second.message.isAck && second.seq == nil)
    // Bob's session stored it once.
    let stored = await eventually(within: 10) { (try? logged(cluster, bobSession)).map { hasCandidate($0, 1) } == true }
    #expect(stored)
    #expect(try logged(cluster, bobSession).filter { hasCandidate([$0], 1) }.count == 1)
    for node in cluster.nodes.dropFirst() { await node.stop() }
  }

  /// A request another node forwarded to the call's node: its answer (a relayed candidate's: sent
  /// back without a seq, not stored) waits for what it caused for the sessions that node holds,
  /// whose batch waits for its window. Without the wait, Bob was answered seconds before Alice's
  /// copy was stored, and her node dying meanwhile lost it.
  @Test func aForwardedRequestIsAnsweredOnlyOnceWhatItCausedOnTheCallsNodeIsStored() async throws {
    let cluster = try await TestCluster.start(2) {
      $0.writeBehindSessions = true
      // Long enough to see (Bob's own ack takes milliseconds), short of the wait after which his
      // node routes an unanswered request again (`ClusterLink.answerWait`).
      $0.batchWindowMilliseconds = 3000
    }
    // The call runs on Alice's node: Bob's requests are forwarded there.
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let (aliceSession, bobSession) = (try #require(alice.sessionId), try #require(bob.sessionId))
    let (bobLog, bobSeq) = (try logged(cluster, bobSession), bob.lastSeq)
    for n in 1...2 {
      let id = "cand-\(n)"
      bob.send(ClientEnvelope(id: id, message: .candidate(.init(callId: call, candidate: candidate(n)))))
      let answer = try await bob.next("the ack to \(id)")
      #expect(answer.message.replyTo == id && answer.message.isAck && answer.seq == nil)
      // The moment Bob reads his ack, Alice's copy is in her session's log in Redis (it was
      // written to her at once).
      #expect(hasCandidate(try logged(cluster, aliceSession), n))
      _ = try await alice.expect(.candidate)
    }
    // His acks are not in his session's stream.
    #expect(bob.lastSeq == bobSeq)
    let bobLogAfter = try logged(cluster, bobSession)
    #expect(bobLogAfter == bobLog, "Bob's log moved: before \(bobLog), after \(bobLogAfter)")
    await cluster.stop()
  }

  @Test func aSessionTakenByAnotherEpochHasItsBatchRefusedAndItsSocketClosed() async throws {
    let cluster = try await writeBehindCluster(2)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let session = try #require(bob.sessionId)
    // Another node resumed Bob's session (its epoch moved on) before Bob's node heard of it.
    let redis = try cluster.connect()
    defer { redis.close() }
    _ = try redis.command(["HINCRBY", .string("dt:session:{\(session)}:meta"), "epoch", "1"])
    #expect(try await alice.candidateFor(call, 1).isAck)
    // His node wrote the candidate, then Redis refused its batch: the socket closes.
    #expect(try await bob.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    // The candidate is not lost, nor sent on by his node (which does not know where the session
    // is now): it stays in that node's inbox, and the session's resume takes it from there.
    #expect(try logged(cluster, session).allSatisfy { !hasCandidate([$0], 1) })
    let (back, welcome) = try await cluster.resume("bob", session, from: bob.lastSeq, on: 0)
    #expect(welcome.resumed && !welcome.resync)
    let first = try await back.next("the candidate")
    guard case .candidate(let c) = first.message else {
      Issue.record("expected the candidate, got \(first.message)")
      return
    }
    #expect(c.candidate == candidate(1))
    try await back.expectQuiet()
    await cluster.stop()
  }

  @Test func aResumeAfterTheHolderDiedAppliesTheLettersItHadNotStored() async throws {
    let cluster = try await writeBehindCluster(2)
    let bob = try await cluster.connect("bob", on: 0)
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    let holder = try #require(cluster.nodes[0].server.cluster?.thisNode)
    // Bob's node dies with a message another node left it unnumbered, read or not, never stored.
    await cluster.nodes[0].stop()
    _ = try await bob.closeCode()
    let message = ServerMessage.candidate(
      .init(callId: "c-lost", from: Peer(userId: "alice", deviceId: "phone"), candidate: candidate(7)))
    let redis = try cluster.connect()
    defer { redis.close() }
    // Left as another node leaves it (indexed for the session's resume).
    _ = try SessionLedger(redis, limits: .init(expiry: .seconds(60))).append(
      ClusterLink.frame(message), to: session, from: "n-" + UUID().uuidString)
    #expect(try redis.command(["XLEN", .string("dt:inbox:{\(holder)}")]).integer == 1)
    // Bob resumes on the other node: the message comes first, numbered after what he had.
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 1)
    #expect(welcome.resumed && !welcome.resync)
    let first = try await back.next()
    #expect(first.seq == lastSeq + 1)
    guard case .candidate(let c) = first.message else { return }
    #expect(c.candidate == candidate(7) && c.callId == "c-lost")
    try await back.expectQuiet()
    await cluster.stop()
  }

  @Test func aResumeWhileTheDeadHoldersHeartbeatIsFreshGetsEveryLetterItHadNotStoredOnceInOrder() async throws {
    let cluster = try await writeBehindCluster(3)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let session = try #require(bob.sessionId)
    let holder = try #require(cluster.nodes[1].server.cluster?.thisNode)
    // Three candidates reach Bob through his node, which stores them.
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    for _ in 1...3 { _ = try await bob.expect(.candidate) }
    bob.ack()
    let stored = await eventually(within: 10) { (try? logged(cluster, session)).map { hasCandidate($0, 3) } == true }
    #expect(stored)
    let lastSeq = bob.lastSeq
    // His node dies as a node killed -9 does: its heartbeat still counts it alive (for
    // `--node-expiry`), and what Alice's node leaves in its inbox from now on nobody reads.
    await cluster.nodes[1].stop()
    _ = try await bob.closeCode()
    let redis = try cluster.connect()
    defer { redis.close() }
    try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(holder)
    for n in 4...8 { #expect(try await alice.candidateFor(call, n).isAck) }
    // Bob resumes on the third node before the heartbeat expires: every letter comes, once, in
    // order, after what he had.
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(4...8, from: lastSeq + 1)
    // And what Alice sends now follows them.
    #expect(try await alice.candidateFor(call, 9).isAck)
    let ninth = try await back.next("candidate 9")
    #expect(ninth.seq == lastSeq + 6)
    try await back.expectQuiet()
    await cluster.stop()
  }

  @Test func aHolderWhoseBatchLandsAfterAResumeElsewhereSendsItsLettersNowhereAndEachArrivesOnce() async throws {
    let cluster = try await writeBehindCluster(3)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    bob.ack()
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    // Bob's node stalls on Redis (as a node frozen mid batch): it numbers Alice's letters (three
    // candidates, and a hold, which no once-key tells from a copy) and writes the candidates, but
    // stores nothing. Bob drops before reading them.
    let link = try #require(cluster.nodes[1].server.cluster)
    let held = HeldSender(link)
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    #expect(try await alice.request(.hold(.init(callId: call, onHold: true))).isAck)
    bob.close()
    _ = try await bob.closeCode()
    // He resumes on the third node, which takes the letters his node had not stored.
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    guard case .hold(let hold) = try await back.next("the hold").message else {
      Issue.record("expected the hold")
      return
    }
    #expect(hold.onHold)
    // His old node's batch lands now, late: refused, and the letters it held go nowhere (the
    // resume applied them), so none arrives twice.
    held.open()
    let refused = await eventually(within: 10) { link.sender.queued == 0 }
    #expect(refused)
    #expect(try await alice.candidateFor(call, 4).isAck)
    let fourth = try await back.next("candidate 4")
    #expect(fourth.seq == lastSeq + 5)
    try await back.expectQuiet()
    let frames = try logged(cluster, session)
    for n in 1...4 { #expect(frames.filter { hasCandidate([$0], n) }.count == 1) }
    await cluster.stop()
  }

  /// Docs/deploy.md's "a session resumed on another node and back on its first node before that
  /// node heard of the first resume", end to end: the other node here is the test itself, acting
  /// in Redis as a write-behind node that never announces the device (so Bob's first node keeps
  /// holding the session at its old epoch), numbering one letter and storing it.
  @Test func aSessionBackOnItsFirstNodeAfterAResumeElsewhereItHadNotHeardOfGetsEachCandidateOnceInOrder()
    async throws
  {
    let cluster = try await writeBehindCluster(2)
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 1)
    let session = try #require(bob.sessionId)
    for n in 1...2 { #expect(try await alice.candidateFor(call, n).isAck) }
    for _ in 1...2 { _ = try await bob.expect(.candidate) }
    bob.ack()
    let stored = await eventually(within: 10) { (try? logged(cluster, session)).map { hasCandidate($0, 2) } == true }
    #expect(stored)
    let seen = bob.lastSeq
    bob.close()
    try await cluster.nodes[1].waitUntilOffline("bob", "phone")
    // Bob resumes on node X, which numbers Alice's third candidate (a letter in X's inbox) and
    // stores it; he processes it there.
    let redis = try cluster.connect()
    defer { redis.close() }
    let x = "n-" + UUID().uuidString
    try ClusterPresence(redis, nodeExpiry: .seconds(60)).heartbeat(x)
    let limits = SessionLedger.Limits(expiry: .seconds(60))
    guard
      case .resumed(let there) = try SessionLedger(redis, limits: limits).resumeHolding(
        session, userId: "bob", deviceId: "phone", from: seen, node: x, allowingAhead: 8)
    else {
      Issue.record("not resumed on X")
      return
    }
    #expect(there.lastSeq == seen && there.letters.isEmpty)
    #expect(try await alice.candidateFor(call, 3).isAck)
    let letters = try NodeMailbox(redis, capacity: 100, expiry: .seconds(60)).receive(
      x, after: "0", limit: 10, timeout: .milliseconds(100))
    let third = try #require(try letters.first.flatMap { try UnnumberedLetter.decode($0.payload) })
    let batch = WriteBehindBatch(
      number: 1,
      sessions: [
        .init(
          id: session, epoch: there.epoch, frames: [.init(seq: seen + 1, bytes: third.frame.bytes(seq: seen + 1))],
          letterPosition: letters.first?.id)
      ])
    #expect(try WriteBehindStore(redis, limits: limits).store(batch, from: x) == [:])
    // Back on his first node, which still holds the session at the epoch before X's.
    let (back, welcome) = try await cluster.resume("bob", session, from: seen + 1, on: 1)
    #expect(welcome.resumed && !welcome.resync)
    // What Alice sends now follows what X numbered, once.
    #expect(try await alice.candidateFor(call, 4).isAck)
    let fourth = try await back.next("candidate 4")
    #expect(fourth.seq == seen + 2)
    guard case .candidate(let c) = fourth.message else {
      Issue.record("expected candidate 4, got \(fourth.message)")
      return
    }
    #expect(c.candidate == candidate(4))
    try await back.expectQuiet()
    // Stored after its write, once, after X's (which the resume took as acknowledged).
    let once = await eventually(within: 10) {
      (try? logged(cluster, session)).map { frames in frames.filter { hasCandidate([$0], 4) }.count == 1 } == true
    }
    #expect(once)
    #expect(try logged(cluster, session).allSatisfy { !hasCandidate([$0], 3) })
    await cluster.stop()
  }

  @Test func aNodeWhoseLeaseLapsesClosesItsSockets() async throws {
    let cluster = try await writeBehindCluster(2)
    let (alice, bob, _) = try await cluster.answeredCall(alice: 0, bob: 1)
    // Bob's node's clock jumps past its lease (as after a freeze): it stops and closes.
    try #require(cluster.nodes[1].server.cluster?.writeBehind).jumpClock(by: .seconds(30))
    #expect(try await bob.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    try await alice.expectQuiet()
    await cluster.stop()
  }

  /// The node's scan for orphaned calls reads the live calls from the database behind the
  /// journal's writes: a database that stalls holds the scan, and the heartbeat came after it on
  /// the same thread, so a stall longer than the lease's slack lapsed the lease of a running
  /// node (every socket closed with 4503, as a loaded machine's stalls may do to any test here).
  /// The heartbeat beats on a thread of its own: a renewal is sent after the moment the lease
  /// would have lapsed without one, and the call goes on.
  @Test func aDatabaseStalledPastTheLeaseLapsesNoLease() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-stalled-scan-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = LiveCallReadsThatWait(try SQLiteLiveCallStore.open(dataDirectory: directory))
    defer { store.release() }
    let cluster = try await TestCluster.start(1, liveCalls: [0: store]) { $0.writeBehindSessions = true }
    let (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 0)
    let link = try #require(cluster.nodes[0].server.cluster)
    let shell = try #require(link.writeBehind)
    let lapses = shell.lease.lapses
    // The next scan (every half call lease) waits on the database.
    store.stall()
    let stalled = await eventually(within: 15) { store.waiting }
    #expect(stalled)
    let lapsedWithoutRenewal = ContinuousClock.now + link.settings.nodeExpiry - link.settings.leaseMargin
    let renewed = await eventually(within: 10) {
      if case (.live(let renewedAt), _) = shell.lease { renewedAt > lapsedWithoutRenewal } else { false }
    }
    #expect(renewed)
    store.release()
    #expect(shell.lease.lapses == lapses)
    #expect(try await alice.candidateFor(call, 1).isAck)
    _ = try await bob.expect(.candidate)
    await cluster.stop()
  }

  /// One write-behind node with a small per-session bound (a quarter of 64 KiB unacknowledged),
  /// Alice and Bob in a call on it, and Redis slow (`held`: nothing the holder numbers from now
  /// on is stored until it is opened). Alice's trickle of 100 candidates passes what Bob's session
  /// may hold unstored; her acks wait for Redis, so what she reads first (`first`) is the answer
  /// to the candidate that passed the bound.
  private struct OverTheBound {
    let cluster: TestCluster
    let alice: SignalingProbe
    let bob: SignalingProbe
    let call: CallID
    let held: HeldSender
    let first: ServerEnvelope

    init() async throws {
      cluster = try await TestCluster.start(1) {
        $0.writeBehindSessions = true
        $0.limits.maxUnackedBytes = 65_536
      }
      (alice, bob, call) = try await cluster.answeredCall(alice: 0, bob: 0)
      held = HeldSender(try #require(cluster.nodes[0].server.cluster))
      for n in 1...100 {
        alice.send(ClientEnvelope(id: "c\(n)", message: .candidate(.init(callId: call, candidate: candidate(n)))))
      }
      first = try await alice.next("the refusal")
    }
  }

  @Test func anEventRefusedBecauseTooMuchWaitsForRedisIsAnsweredRateLimitedAndHandledAfreshWhenSentAgain()
    async throws
  {
    let over = try await OverTheBound()
    let (cluster, alice, bob, call, held, first) = (
      over.cluster, over.alice, over.bob, over.call, over.held, over.first
    )
    // The refusal of the event that passed Bob's bound: `rate-limited`, outside the sequence, and
    // her socket stays open.
    #expect(first.seq == nil)
    guard case .error(let error) = first.message, error.code == .rateLimited, let refusedID = error.replyTo,
      let n = Int(refusedID.dropFirst())
    else {
      Issue.record("expected rate-limited, got \(first.message)")
      return
    }
    #expect(error.retryAfterMs != nil)
    held.open()
    // The rest of her trickle is still being handled as Redis takes what waited: sent again now,
    // the refused candidate could find Bob's session full again (answered `rate-limited` once
    // more, as a client sends it again after `retryAfterMs`). Once every candidate of the trickle
    // is answered, each one taken is stored (an ack is written only once its event is), so Bob's
    // session holds nothing unstored and the candidate sent again must be taken.
    var unanswered = Set((1...100).map { "c\($0)" }).subtracting([refusedID])
    var refusedAgain: [String] = []
    while !unanswered.isEmpty {
      switch try await alice.next("the answers to the trickle (\(unanswered.count) left)").message {
      case .ack(let ack): unanswered.remove(ack.replyTo)
      case .error(let refusal) where refusal.code == .rateLimited:
        refusal.replyTo.map { _ = unanswered.remove($0) }
        refusedAgain.append(refusal.replyTo ?? "?")
      default: continue
      }
    }
    // Sent again, it is handled afresh (its earlier answer was forgotten): acknowledged, and Bob
    // gets it.
    alice.send(ClientEnvelope(id: refusedID, message: .candidate(.init(callId: call, candidate: candidate(n)))))
    #expect(try await alice.answer(to: refusedID, "the answer to \(refusedID) sent again").isAck)
    // What Bob got, kept so that a failure says it (rare: the wait below once timed out under
    // load with the retry acknowledged, for a cause not found yet).
    var got: [String] = []
    var found = false
    do {
      while !found {
        let envelope = try await bob.next("candidate \(n)")
        let seq = envelope.seq.map(String.init) ?? "-"
        guard case .candidate(let c) = envelope.message else {
          got.append("\(envelope.message.knownType?.rawValue ?? "?")#\(seq)")
          continue
        }
        got.append("\(c.candidate.candidate.prefix { $0 != " " })#\(seq)")
        found = c.candidate == candidate(n)
      }
    } catch {
      let again = refusedAgain.joined(separator: " ")
      throw ProbeFailure(description: "\(error); Bob got \(got.joined(separator: " ")); refused again: \(again)")
    }
    #expect(found)
    await cluster.stop()
  }

  @Test func aHangUpForASessionOverItsBoundIsNotRefusedAndEndsTheCallForThePeer() async throws {
    let over = try await OverTheBound()
    let (cluster, alice, bob, call, held, first) = (
      over.cluster, over.alice, over.bob, over.call, over.held, over.first
    )
    // Alice's trickle filled what Bob's session may hold unstored: a candidate is refused.
    guard case .error(let error) = first.message, error.code == .rateLimited else {
      Issue.record("expected rate-limited, got \(first.message)")
      return
    }
    // She hangs up: the call ends here at once, so its message to Bob is not refused (sent again,
    // the hang-up would find no call, and Bob would never hear of the end); it waits for Redis.
    // (Whether the end would have fitted in what Bob's session had left depends on the frames'
    // sizes: `WriteBehindHolderBehaviour` pins the rule itself.)
    alice.send(ClientEnvelope(id: "h1", message: .hangup(.init(callId: call))))
    held.open()
    #expect(try await alice.answer(to: "h1", "the hang-up's answer").isAck)
    var ended = false
    while !ended {
      if case .callEnded(let end) = try await bob.next("the call's end").message, end.callId == call { ended = true }
    }
    #expect(ended)
    await cluster.stop()
  }
}

/// Holds a node's Redis sender (a job that waits) until `open()`, so that nothing the node sends
/// Redis meanwhile lands: a Redis gone slow. Opened when it goes at the latest, so that a test
/// that fails early does not leave the node's sender stuck.
final class HeldSender {
  private let gate = DispatchSemaphore(value: 0)
  private var opened = false

  init(_ link: ClusterLink) {
    let gate = gate
    #expect(link.sender.submit { _ in gate.wait() })
  }

  func open() {
    guard !opened else { return }
    opened = true
    gate.signal()
  }

  deinit { open() }
}

/// A live-call store whose reads of every live call (a node's scan for orphaned calls) wait,
/// once `stall` was called, until `release`: a database gone slow.
private final class LiveCallReadsThatWait: LiveCallStore {
  private let base: any LiveCallStore
  private let gate = DispatchSemaphore(value: 0)
  private let state = Locked<(stalled: Bool, waiting: Bool, released: Bool)>((false, false, false))

  init(_ base: any LiveCallStore) { self.base = base }

  func stall() { state.withLock { $0.stalled = true } }

  /// Whether a read waits now.
  var waiting: Bool { state.current.waiting }

  func release() {
    let first = state.withLock { state in
      defer { state.released = true }
      return !state.released
    }
    if first { gate.signal() }
  }

  func liveCalls() throws -> [StoredLiveCall] {
    let wait = state.withLock { state in
      state.waiting = state.stalled && !state.released
      return state.waiting
    }
    if wait {
      gate.wait()
      state.withLock { $0.waiting = false }
    }
    return try base.liveCalls()
  }

  func write(_ changes: [LiveCallChange]) throws { try base.write(changes) }
  func completeInterruptedGroupCalls() throws -> Int { try base.completeInterruptedGroupCalls() }
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try base.callsEnded(since: since) }
  func isCallIdUsed(_ callId: CallID) async throws -> Bool { try await base.isCallIdUsed(callId) }
}
