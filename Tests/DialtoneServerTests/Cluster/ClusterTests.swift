import DialtoneCluster
import DialtoneJSON
import DialtoneProtocol
import DialtoneRedis
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Reads up to the answer to request `id`: what the device got until then, in order, and it.
private func messagesUntilReply(_ probe: SignalingProbe, _ id: String) async throws -> [ServerMessage] {
  var seen: [ServerMessage] = []
  for _ in 0..<50 {
    let message = try await probe.next("the answer to \(id)").message
    seen.append(message)
    if message.replyTo == id { return seen }
  }
  throw ProbeFailure(description: "no answer to \(id)")
}

/// Alice on node 1 calls Bob, whose phone is on node 2 and laptop on node 3: both ring.
private func ringingTwoDevices(_ cluster: TestCluster) async throws -> (
  alice: SignalingProbe, phone: SignalingProbe, laptop: SignalingProbe, call: CallID
) {
  let alice = try await cluster.connect("alice", on: 0)
  let phone = try await cluster.connect("bob", device: "phone", on: 1)
  let laptop = try await cluster.connect("bob", device: "laptop", on: 2)
  let call = callID()
  #expect(try await alice.invite(call, to: "bob").isAck)
  _ = try await phone.expect(.invite)
  _ = try await laptop.expect(.invite)
  return (alice, phone, laptop, call)
}

private let answer = SessionDescription(sdp: "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")

@Suite(.scratchPostgres, .scratchRedis, .serialized) struct ClusterTests {
  @Test func aCallBetweenTwoNodesRunsAsOnOne() async throws {
    let cluster = try await TestCluster.start()
    let alice = try await cluster.connect("alice", on: 0)
    let bob = try await cluster.connect("bob", on: 1)
    let call = callID()

    #expect(try await alice.invite(call, to: "bob").isAck)
    #expect(try cluster.owner(of: call) == cluster.nodes[0].server.cluster?.thisNode)
    guard case .invite(let invite) = try await bob.expect(.invite) else { return }
    #expect(invite.from.userId == "alice" && invite.callId == call)
    #expect(try await bob.act(.ringing(.init(callId: call))).isAck)
    _ = try await alice.expect(.ringing)
    #expect(try await bob.act(.accept(.init(callId: call, answer: answer))).isAck)
    _ = try await alice.expect(.accept)

    // Trickle both ways: every candidate arrives once, in order.
    for n in 1...5 { #expect(try await alice.candidateFor(call, n).isAck) }
    for n in 1...5 {
      guard case .candidate(let c) = try await bob.expect(.candidate) else { return }
      #expect(c.candidate == candidate(n))
    }
    for n in 6...10 { #expect(try await bob.candidateFor(call, n).isAck) }
    for n in 6...10 {
      guard case .candidate(let c) = try await alice.expect(.candidate) else { return }
      #expect(c.candidate == candidate(n))
    }
    try await bob.expectQuiet()

    cluster.nodes[0].clock.advance(by: 4)
    #expect(try await bob.act(.hangup(.init(callId: call))).isAck)
    #expect(try await alice.expect(.callEnded).endReason == .hangup)
    let released = await eventually(within: 10) {
      do { return try cluster.owner(of: call) == nil } catch { return false }
    }
    #expect(released)
    // The history is the shared database's: any node answers it.
    let history = try await cluster.nodes[2].http("GET", "/v1/calls", token: cluster.nodes[2].token("bob"))
    #expect(history.json?["calls"]?.arrayValue?.map { $0["callId"]?.stringValue } == [call])
    // The nodes' metrics say what crossed Redis: Alice's candidates reached Bob's node as
    // frames, both nodes stored messages, and each holds its device's session.
    let bobsNode = cluster.nodes[1]
    #expect(try await bobsNode.metric(#"dialtone_cluster_letters_total{kind="frame"}"#) >= 5)
    #expect(try await bobsNode.metric("dialtone_cluster_store_transactions_total") > 0)
    #expect(try await bobsNode.metric("dialtone_cluster_sessions_held") == 1)
    #expect(try await cluster.nodes[0].metric("dialtone_cluster_store_failures_total") == 0)
    await cluster.stop()
  }

  @Test func aCalleeThatConnectsToAnyNodeWhileItRingsIsRung() async throws {
    let cluster = try await TestCluster.start()
    let alice = try await cluster.connect("alice", on: 0)
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    // Bob's phone wakes (a push) and connects to another node: the call's node rings it there.
    let bob = try await cluster.nodes[2].connect("bob")
    guard case .invite(let invite) = try await bob.expect(.invite) else { return }
    #expect(invite.callId == call)
    #expect(try await bob.act(.accept(.init(callId: call, answer: answer))).isAck)
    _ = try await alice.expect(.accept)
    await cluster.stop()
  }

  @Test func aDeviceConnectingToAnotherNodeReplacesItsOlderSession() async throws {
    let cluster = try await TestCluster.start()
    let old = try await cluster.connect("bob", on: 0)
    _ = try await cluster.connect("bob", on: 1)
    #expect(try await old.closeCode() == UInt16(CloseCode.replaced.rawValue))
    await cluster.stop()
  }

  @Test func aDeclineOnOneNodeEndsTheRingOnTheOthers() async throws {
    let cluster = try await TestCluster.start()
    let (alice, phone, laptop, call) = try await ringingTwoDevices(cluster)
    #expect(try await laptop.act(.decline(.init(callId: call))).isAck)
    #expect(try await alice.expect(.callEnded).endReason == .declined)
    #expect(try await phone.expect(.callEnded).endReason == .declinedElsewhere)
    await cluster.stop()
  }

  @Test func theCallOfANodeThatLeftIsTakenOverWhenItsDevicesCarryOn() async throws {
    let cluster = try await TestCluster.start()
    let (_, bob, call) = try await cluster.answeredCall()

    // Alice's node stops; her phone reconnects to the third node. The call is in the shared
    // journal: the first request about it takes it over, and her new session, which reached no
    // node running the call when it started, gets the accept again.
    await cluster.nodes[0].stop()
    let back = try await cluster.connect("alice", on: 2)
    #expect(try await bob.candidateFor(call, 1).isAck)
    guard case .accept(let accept) = try await back.expect(.accept) else { return }
    #expect(accept.callId == call)
    guard case .candidate(let c) = try await back.expect(.candidate) else { return }
    #expect(c.candidate == candidate(1))
    #expect(try cluster.owner(of: call) == cluster.nodes[1].server.cluster?.thisNode)
    #expect(try await back.act(.hangup(.init(callId: call))).isAck)
    #expect(try await bob.expect(.callEnded).endReason == .hangup)
    for node in cluster.nodes.dropFirst() { await node.stop() }
  }

  @Test func aStoppingNodeHandsItsRingingCallOverAndItsRingTimeoutStillFires() async throws {
    let cluster = try await TestCluster.start()
    let alice = try await cluster.connect("alice", on: 0)
    let bob = try await cluster.connect("bob", on: 1)
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)

    // Node 1 drains: its lease is released once the journal has the call.
    await cluster.nodes[0].stop()
    #expect(try cluster.owner(of: call) == nil)
    let back = try await cluster.connect("alice", on: 2)
    // Bob's phone keeps ringing; the first request about the call has node 2 take it over.
    #expect(try await bob.act(.ringing(.init(callId: call))).isAck)
    #expect(try cluster.owner(of: call) == cluster.nodes[1].server.cluster?.thisNode)
    _ = try await back.expect(.ringing)
    // Its ring deadline came with it: nobody answers, and the new owner ends it as missed.
    cluster.nodes[1].clock.advance(by: 61)
    #expect(try await back.expect(.callEnded).endReason == .missed)
    #expect(try await bob.expect(.callEnded).endReason == .missed)
    for node in cluster.nodes.dropFirst() { await node.stop() }
  }

  @Test func twoDevicesAcceptingOnTwoNodesAtOnceHaveOneWinner() async throws {
    let cluster = try await TestCluster.start()
    let (alice, phone, laptop, call) = try await ringingTwoDevices(cluster)
    let accept = ClientMessage.accept(.init(callId: call, answer: answer))
    phone.send(ClientEnvelope(id: "a-phone", message: accept))
    laptop.send(ClientEnvelope(id: "a-laptop", message: accept))
    // One accept wins; the other device is told it was answered elsewhere and its accept fails.
    let seen = [try await messagesUntilReply(phone, "a-phone"), try await messagesUntilReply(laptop, "a-laptop")]
    let replies = seen.flatMap { $0.filter { $0.replyTo == "a-phone" || $0.replyTo == "a-laptop" } }
    let acks = replies.filter(\.isAck).count
    #expect(replies.count == 2)
    #expect(seen.flatMap { $0 }.filter { $0.endReason == .answeredElsewhere }.count == 1)
    #expect(acks == 1)
    guard case .accept(let accepted) = try await alice.expect(.accept) else { return }
    #expect(["phone", "laptop"].contains(accepted.from.deviceId))
    try await alice.expectQuiet()
    await cluster.stop()
  }

  /// Carol's call to Bob runs on node 3; Alice calls Bob from node 1 and gets `busy`, as on one
  /// node, and Bob is not rung.
  @Test func aCalleeTalkingInACallThatAnotherNodeRunsIsBusy() async throws {
    let cluster = try await TestCluster.start()
    let carol = try await cluster.connect("carol", on: 2)
    let bob = try await cluster.connect("bob", on: 1)
    let alice = try await cluster.connect("alice", on: 0)
    let first = callID()
    #expect(try await carol.invite(first, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(try await bob.act(.accept(.init(callId: first, answer: answer))).isAck)
    _ = try await carol.expect(.accept)
    try await cluster.waitForTalking("bob", true)
    let second = callID()
    #expect(try await alice.invite(second, to: "bob").isAck)
    guard case .callEnded(let ended) = try await alice.expect(.callEnded) else { return }
    #expect(ended.callId == second && ended.reason == .busy)
    try await bob.expectQuiet()
    // Once Carol hangs up, Bob is free again for a call from any node.
    #expect(try await carol.act(.hangup(.init(callId: first))).isAck)
    _ = try await bob.expect(.callEnded)
    try await cluster.waitForTalking("bob", false)
    let third = callID()
    #expect(try await alice.invite(third, to: "bob").isAck)
    #expect(try await bob.expect(.invite).callId == third)
    await cluster.stop()
  }

  /// Bob on node 2 calls Alice on node 1 while her call to him starts: one node decides, and the
  /// lower callId survives either way round, as on one node. The survivor then runs as any call.
  @Test(arguments: [true, false]) func twoUsersCallingEachOtherFromTwoNodesKeepTheLowerCallId(_ newerWins: Bool)
    async throws
  {
    let cluster = try await TestCluster.start()
    let alice = try await cluster.connect("alice", on: 0)
    let bob = try await cluster.connect("bob", on: 1)
    let (loser, survivor) = try await glare(alice, bob, newerWins: newerWins)
    let (callee, caller) = newerWins ? (bob, alice) : (alice, bob)
    if newerWins { #expect(try await bob.expect(.invite).callId == survivor) }
    #expect(try await callee.act(.accept(.init(callId: survivor, answer: answer))).isAck)
    _ = try await caller.expect(.accept)
    #expect(try cluster.owner(of: survivor) != nil)
    #expect(try cluster.owner(of: loser) == nil)
    try await alice.expectQuiet()
    try await bob.expectQuiet()
    await cluster.stop()
  }

  @Test func aRingIsPushedOnceWhicheverNodesTheDevicesUseAndNeverToOneConnectedElsewhere() async throws {
    let apns = try APNsMock.start()
    defer { apns.process.stop() }
    let cluster = try await TestCluster.start {
      $0.apnsKeyFile = apns.keyFile
      $0.apnsKeyID = apns.keyID
      $0.apnsTeamID = apns.teamID
      $0.apnsURL = apns.baseURL
      $0.pushCAFile = apns.caFile
    }
    // Bob has two iPhones; the second is connected to node 3, the first to none.
    for (device, token) in [("iphone", "b1"), ("ipad", "b2")] {
      let body =
        #"{"installationId":"\#(device)-install","platform":"ios","voipToken":"\#(token + String(repeating: "a", count: 62))","bundleId":"com.example.chat","apnsEnvironment":"sandbox"}"#
      let node = cluster.nodes[1]
      let response = try await node.http("POST", "/v1/devices", token: node.token("bob", device: device), body: body)
      #expect(response.status == 200)
    }
    let ipad = try await cluster.connect("bob", device: "ipad", on: 2)
    let alice = try await cluster.connect("alice", on: 0)
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await ipad.expect(.invite)
    let pushes = try await apns.process.waitFor("the ring's push") { !$0.isEmpty }
    try await Task.sleep(for: .milliseconds(500))  // any second push would be in by now
    let tokens = apns.process.requests().compactMap { $0["token"]?.stringValue }
    #expect(tokens == ["b1" + String(repeating: "a", count: 62)])
    #expect(pushes.count >= 1)
    await cluster.stop()
  }

  @Test func aDeviceResumesOnAnotherNodeWithNothingLostOrDuplicated() async throws {
    let cluster = try await TestCluster.start()
    let (alice, bob, call) = try await cluster.answeredCall()
    bob.ack()
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    // Bob's candidate reaches Alice; its answer is stored for Bob, whose socket drops unread.
    bob.send(ClientEnvelope(id: "c-1", message: .candidate(.init(callId: call, candidate: candidate(1)))))
    guard case .candidate(let first) = try await alice.expect(.candidate) else { return }
    #expect(first.candidate == candidate(1))
    bob.close()
    _ = try await bob.closeCode()
    try await cluster.waitForPresence("bob", "phone", connected: false)
    for n in 2...5 { #expect(try await alice.candidateFor(call, n).isAck) }

    // He comes back through another node: the same session, everything after his last seq once.
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && !welcome.resync && welcome.sessionId == session)
    var replayed: [ServerMessage] = []
    for n in 1...5 {
      let envelope = try await back.next()
      #expect(envelope.seq == lastSeq + UInt64(n))
      replayed.append(envelope.message)
    }
    #expect(replayed.first?.replyTo == "c-1")
    #expect(
      replayed.dropFirst().compactMap { if case .candidate(let c) = $0 { c.candidate } else { nil } }
        == (2...5).map(candidate))
    // The candidate re-sent with its id gets its first answer and is not relayed again.
    back.send(ClientEnvelope(id: "c-1", message: .candidate(.init(callId: call, candidate: candidate(1)))))
    #expect(try await back.next().message.replyTo == "c-1")
    try await alice.expectQuiet()
    // What Alice sends from now on reaches him at his new node.
    #expect(try await alice.candidateFor(call, 6).isAck)
    guard case .candidate(let sixth) = try await back.expect(.candidate) else { return }
    #expect(sixth.candidate == candidate(6))
    try await back.expectQuiet()
    await cluster.stop()
  }

  @Test func aClientsAcknowledgementReachesRedisWithHousekeepingAndFreesWhatItHas() async throws {
    let cluster = try await TestCluster.start(2)
    let (alice, bob, call) = try await cluster.answeredCall()
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    for _ in 1...3 { _ = try await bob.expect(.candidate) }
    let session = try #require(bob.sessionId)
    let redis = try cluster.connect()
    defer { redis.close() }
    let log: RedisArgument = .string("dt:session:{\(session)}:log")
    // Stored, unacknowledged: kept for a resume.
    let through = RedisArgument.integer(Int64(bob.lastSeq))
    #expect(try redis.command(["ZCOUNT", log, "-inf", through]) == .integer(Int64(bob.lastSeq)))
    bob.ack()
    // Not at once (the node holds acknowledgements for its next heartbeat), but within a few.
    let freed = await eventually(within: 10) { (try? redis.command(["ZCOUNT", log, "-inf", through])) == .integer(0) }
    #expect(freed)
    await cluster.stop()
  }

  @Test func aDeviceWhoseNodeStoppedResumesOnAnotherOne() async throws {
    let cluster = try await TestCluster.start()
    let (alice, bob, call) = try await cluster.answeredCall()
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)

    // Bob's node drains; what Alice sends meanwhile is kept for him, though no node holds him.
    await cluster.nodes[1].stop()
    #expect(try await bob.closeCode() == UInt16(CloseCode.goingAway.rawValue))
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    let (back, welcome) = try await cluster.resume("bob", session, from: lastSeq, on: 2)
    #expect(welcome.resumed && welcome.sessionId == session)
    try await back.expectCandidates(1...3, from: lastSeq + 1)
    // (Request ids are the session's: the resumed one still knows this probe's first ids.)
    back.send(ClientEnvelope(id: "bye", message: .hangup(.init(callId: call))))
    #expect(try await back.next().message.replyTo == "bye")
    #expect(try await alice.expect(.callEnded).endReason == .hangup)
    for index in [0, 2] { await cluster.nodes[index].stop() }
  }

  @Test func aRedisThatLostItsStateHasEveryClientResyncAndTheCallGoesOn() async throws {
    let cluster = try await TestCluster.start()
    let (alice, bob, call) = try await cluster.answeredCall()
    let sessions = (try #require(alice.sessionId), try #require(bob.sessionId))

    // As a Redis without persistence restarting: every key is gone.
    let redis = try cluster.connect()
    try redis.command(["FLUSHALL"])
    redis.close()
    #expect(try await alice.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    #expect(try await bob.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))

    // Their sessions are gone: they resync, ask how the call stands, and carry on with it.
    var again: [SignalingProbe] = []
    for (index, (user, session)) in [("alice", sessions.0), ("bob", sessions.1)].enumerated() {
      let (probe, welcome) = try await cluster.resume(user, session, from: 1, on: index)
      #expect(!welcome.resumed && welcome.resync)
      again.append(probe)
    }
    try await cluster.waitForPresence("bob", "phone", connected: true)
    again[1].send(ClientEnvelope(id: "state", message: .getCall(.init(callId: call))))
    guard case .ack(let ack) = try await messagesUntilReply(again[1], "state").last else {
      Issue.record("get-call was not answered")
      return
    }
    #expect(ack.call?.state == .accepted)
    // The caller's session is new: it gets the accept again first (a client that had it ignores it).
    again[0].send(ClientEnvelope(id: "bye", message: .hangup(.init(callId: call))))
    #expect(try await messagesUntilReply(again[0], "bye").last?.isAck == true)
    #expect(try await again[1].expect(.callEnded).endReason == .hangup)
    await cluster.stop()
  }

  @Test func aLeaseAnotherNodeTookOverStopsTheCallHere() async throws {
    let cluster = try await TestCluster.start(2)
    let alice = try await cluster.connect("alice", on: 0)
    let bob = try await cluster.connect("bob", on: 1)
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    let node = try #require(cluster.nodes[0].server.cluster?.thisNode)
    let who = Identity(userId: "alice", deviceId: "phone", name: nil)
    let redis = try cluster.connect()
    defer { redis.close() }
    #expect(try cluster.owner(of: call) == node)
    // Another (live) node took it over, as after this one stalled past its heartbeat: this node
    // stops running it (it may have ended there already; running it here too would answer for a
    // call that is over).
    try redis.command(["SET", "dt:node:{n-other}", "alive", "PX", "60000"])
    try redis.command(["SET", .string("dt:call-owner:{\(call)}"), "n-other", "PX", "60000"])
    let stopped = await eventually(within: 10) { await cluster.nodes[0].server.hub.callState(call, for: who) == nil }
    #expect(stopped)
    await cluster.stop()
  }

  @Test func aStoppingServerStartsNoNewSession() async throws {
    let server = try await TestServer()
    await server.server.hub.prepareForShutdown()
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    probe.send(ClientEnvelope(id: "h", message: .hello(.init(token: server.token("bob")))))
    #expect(try await probe.closeCode() == UInt16(CloseCode.goingAway.rawValue))
    await server.stop()
  }
}
