import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneServer

/// Acks of trickled candidates wait (here up to 30 s) to share a write with the next message to
/// the sender; every other answer, and every error, leaves at once.
@Suite(.serialized) struct AckCoalescingTests {
  private func candidate(_ callId: CallID, _ n: Int, id: String) -> ClientEnvelope {
    ClientEnvelope(id: id, message: .candidate(.init(callId: callId, candidate: DialtoneServerTests.candidate(n))))
  }

  @Test func candidateAcksRideWithThePeersNextMessage() async throws {
    let server = try await TestServer { $0.ackDelay = 30 }
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()

    // Answers that decide a call are not held: these requests would time out otherwise.
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(
      try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n")))).isAck)
    _ = try await alice.expect(.accept)

    alice.send(candidate(call, 1, id: "a1"))
    _ = try await bob.expect(.candidate)
    try await Task.sleep(for: .milliseconds(300))
    #expect(!alice.hasUnread, "the ack of a1 waits for company")

    // Bob's candidate goes to Alice: her held ack leaves first, in the same write.
    bob.send(candidate(call, 2, id: "b1"))
    let ack = try await alice.next("ack of a1")
    #expect(ack.message.isAck && ack.message.replyTo == "a1")
    let relayed = try await alice.expect(.candidate)
    #expect(relayed.callId == call)

    // Errors are never held.
    #expect(try await alice.candidateFor("c-unknown", 3).errorCode == .notFound)
    // A ping's answer is not held either, and it carries Bob's held ack out before it.
    let bobPing = bob.newID()
    bob.send(ClientEnvelope(id: bobPing, message: .ping(.init())))
    #expect(try await bob.next("ack of b1").message.replyTo == "b1")
    #expect(try await bob.next("ping answer").message.replyTo == bobPing)
    await server.stop()
  }

  @Test func heldAcksAreResentAfterAResume() async throws {
    let server = try await TestServer { $0.ackDelay = 30 }
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    _ = try await alice.invite(call, to: "bob")
    _ = try await bob.expect(.invite)

    alice.send(candidate(call, 1, id: "a1"))
    _ = try await bob.expect(.candidate)
    // Alice's socket dies with the ack still held; the session kept it, so the resume brings it.
    let sessionId = try #require(alice.sessionId)
    let lastSeq = alice.lastSeq
    alice.close()
    try await server.waitUntilOffline("alice", "phone")
    let again = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await again.hello(
      token: server.token("alice"), resume: .init(sessionId: sessionId, lastSeq: lastSeq))
    #expect(welcome.resumed)
    let resent = try await again.next("resent ack")
    #expect(resent.message.replyTo == "a1" && resent.message.isAck)
    await server.stop()
  }
}
