import DialtoneCluster
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// The hub with sessions kept in a cluster's store (`SessionStore`, here in memory): welcomes
/// wait for the store, every message is numbered there and written in seq order, and a session
/// the store cannot keep whole is closed so that its client resumes or resyncs.
@Suite(.serialized) struct SharedSessionsSeamTests {
  private func start() async throws -> (TestServer, InMemorySharedSessions) {
    let store = InMemorySharedSessions()
    let server = try await TestServer(sessionStore: store)
    store.attach(server.server.hub)
    return (server, store)
  }

  /// Alice calls Bob: both connected, Bob has read the invite.
  private func ringingCall(_ server: TestServer) async throws -> (SignalingProbe, SignalingProbe, CallID) {
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    return (alice, bob, call)
  }

  /// Alice calls Bob, who answers: both have read the accept.
  private func answeredCall(_ server: TestServer) async throws -> (SignalingProbe, SignalingProbe, CallID) {
    let (alice, bob, call) = try await ringingCall(server)
    #expect(try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))).isAck)
    _ = try await alice.expect(.accept)
    return (alice, bob, call)
  }

  /// Reads `count` messages and checks their seqs continue `after` one by one.
  private func contiguous(_ probe: SignalingProbe, after: UInt64, count: Int) async throws -> [ServerMessage] {
    var messages: [ServerMessage] = []
    for n in 1...count {
      let envelope = try await probe.next()
      #expect(envelope.seq == after + UInt64(n))
      messages.append(envelope.message)
    }
    return messages
  }

  @Test func everyMessageIsNumberedByTheStoreAndArrivesInOrder() async throws {
    let (server, store) = try await start()
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    #expect(alice.sessionId == store.session(of: "alice", "phone"))
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    _ = try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n"))))
    _ = try await alice.expect(.accept)
    for n in 1...5 { #expect(try await alice.candidateFor(call, n).isAck) }
    let candidates = try await contiguous(bob, after: bob.lastSeq, count: 5)
    #expect(
      candidates.compactMap { if case .candidate(let c) = $0 { c.candidate } else { nil } } == (1...5).map(candidate))
    bob.ack()
    let acked = await eventually { store.acknowledged(bob.sessionId ?? "") == bob.lastSeq }
    #expect(acked)
    await server.stop()
  }

  @Test func aMissingFrameHoldsTheLaterOnesBackUntilTheStoreIsReadAgain() async throws {
    let (server, store) = try await start()
    let (alice, bob, call) = try await answeredCall(server)
    let bobSession = try #require(bob.sessionId)
    let before = bob.lastSeq
    // The second candidate's letter is lost: the third waits behind it.
    store.withhold(bobSession, seq: before + 2)
    for n in 1...3 { #expect(try await alice.candidateFor(call, n).isAck) }
    guard case .candidate(let first) = try await bob.expect(.candidate) else { return }
    #expect(first.candidate == candidate(1))
    #expect(store.fetches.isEmpty)
    // The gap wait passes (nothing else in this call has a timer running).
    let fetched = await eventually {
      server.clock.advance(by: 1)
      return !store.fetches.isEmpty
    }
    #expect(fetched)
    let rest = try await contiguous(bob, after: before + 1, count: 2)
    #expect(
      rest.compactMap { if case .candidate(let c) = $0 { c.candidate } else { nil } } == [candidate(2), candidate(3)])
    // Every read asks from the missing frame on: the loop above may have let the gap wait pass
    // again before the first read's answer filled it, and the hub then asks again.
    #expect(!store.fetches.isEmpty && store.fetches.allSatisfy { $0.1 == before + 1 })
    try await bob.expectQuiet()
    await server.stop()
  }

  @Test func aMessageTheStoreCannotKeepClosesTheSessionSoItsClientComesBack() async throws {
    let (server, store) = try await start()
    let alice = try await server.connect("alice")
    store.fail(true)
    alice.send(ClientEnvelope(id: "p1", message: .ping(.init())))
    #expect(try await alice.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    // While the store is down, a hello is told to try again later.
    let bob = try SignalingProbe(client: server.client, url: server.webSocketURL)
    bob.send(ClientEnvelope(id: "h1", message: .hello(.init(token: server.token("bob")))))
    #expect(try await bob.next().message.errorCode == .internal)
    #expect(try await bob.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    await server.stop()
  }

  @Test func aResumeThroughTheStoreReplaysWhatWasMissedAndKeepsTheAnswers() async throws {
    let (server, _) = try await start()
    let (alice, bob, call) = try await ringingCall(server)
    bob.send(
      ClientEnvelope(id: "acc", message: .accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))))
    #expect(try await bob.next().message.isAck)
    _ = try await alice.expect(.accept)
    let (session, lastSeq) = (try #require(bob.sessionId), bob.lastSeq)
    bob.close()
    _ = try await bob.closeCode()
    try await server.waitUntilOffline("bob", "phone")
    for n in 1...2 { #expect(try await alice.candidateFor(call, n).isAck) }

    let back = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await back.hello(token: server.token("bob"), resume: .init(sessionId: session, lastSeq: lastSeq))
    #expect(welcome.resumed && !welcome.resync && welcome.sessionId == session)
    let missed = try await contiguous(back, after: lastSeq, count: 2)
    #expect(missed.map(\.knownType) == [.candidate, .candidate])
    // The accept sent again with its id gets its first answer, and has no second effect.
    back.send(
      ClientEnvelope(id: "acc", message: .accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))))
    let again = try await back.next().message
    #expect(again.isAck && again.replyTo == "acc")
    try await alice.expectQuiet()
    await server.stop()
  }

  @Test func whatAClientSendsBeforeItsWelcomeIsHandledAfterIt() async throws {
    let (server, store) = try await start()
    store.holdOpens(true)
    let alice = try SignalingProbe(client: server.client, url: server.webSocketURL)
    alice.send(ClientEnvelope(id: "h1", message: .hello(.init(token: server.token("alice")))))
    alice.send(ClientEnvelope(id: "p1", message: .ping(.init())))
    alice.send(ClientEnvelope(id: "p2", message: .ping(.init())))
    let held = await eventually { store.heldOpenCount == 1 }
    #expect(held)
    store.releaseOpens()
    guard case .welcome = try await alice.next().message else {
      Issue.record("no welcome first")
      return
    }
    #expect(try await alice.next().message.replyTo == "p1")
    #expect(try await alice.next().message.replyTo == "p2")
    await server.stop()
  }

  @Test func aClientThatSendsTooMuchBeforeItsWelcomeIsClosed() async throws {
    let (server, store) = try await start()
    store.holdOpens(true)
    let alice = try SignalingProbe(client: server.client, url: server.webSocketURL)
    alice.send(ClientEnvelope(id: "h1", message: .hello(.init(token: server.token("alice")))))
    for n in 0...SocketGate.maxEarlyMessages { alice.send(ClientEnvelope(id: "p\(n)", message: .ping(.init()))) }
    #expect(try await alice.closeCode() == UInt16(CloseCode.overLimit.rawValue))
    await server.stop()
  }

  @Test func aClusterThatLostItsStateClosesEverySocket() async throws {
    let (server, _) = try await start()
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    server.server.hub.deliver(.cluster(.stateLost))
    #expect(try await alice.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    #expect(try await bob.closeCode() == UInt16(CloseCode.tryAgainLater.rawValue))
    await server.stop()
  }

  @Test func aSessionThatEndsHereEndsInTheStore() async throws {
    let (server, store) = try await start()
    let bob = try await server.connect("bob")
    let session = try #require(bob.sessionId)
    // A newer session of the same device replaces it.
    let again = try await server.connect("bob")
    #expect(try await bob.closeCode() == UInt16(CloseCode.replaced.rawValue))
    let ended = await eventually { store.ended.contains(session) }
    #expect(ended)
    #expect(again.sessionId != session)
    await server.stop()
  }

  @Test func aRequestTheStoreCannotTakeIsRefusedBeforeItIsHandledAndNothingMoves() async throws {
    let (server, store) = try await start()
    let (alice, bob, call) = try await ringingCall(server)
    // Too much waits for the store: Bob's accept is refused up front, `rate-limited`, and not
    // handled (the call still rings, nothing reaches Alice).
    store.refuseRequests(true)
    let refused = try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n"))))
    guard case .error(let error) = refused else {
      Issue.record("expected rate-limited, got \(refused)")
      return
    }
    #expect(error.code == .rateLimited && error.retryAfterMs != nil && error.callId == call)
    store.refuseRequests(false)
    try await alice.expectQuiet()
    // Sent again, it is handled as the first accept of a ringing call.
    #expect(try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))).isAck)
    _ = try await alice.expect(.accept)
    await server.stop()
  }

  @Test func aRelayedCandidateIsNotAskedForAdmission() async throws {
    let (server, store) = try await start()
    let (alice, bob, call) = try await answeredCall(server)
    // The store would refuse any request: a candidate changes no call's state, so it is handled
    // and relayed (a store that cannot keep it refuses it after, as before admission).
    store.refuseRequests(true)
    #expect(try await alice.candidateFor(call, 1).isAck)
    guard case .candidate(let relayed) = try await bob.expect(.candidate) else { return }
    #expect(relayed.candidate == candidate(1))
    await server.stop()
  }
}
