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

  /// A relayed candidate's ack goes without a seq (it waits for company all the same): the
  /// sender's numbered messages run on without a gap, a resume does not replay it, and the
  /// candidate sent again is handled afresh (protocol.md 5.3): relayed again, acked again without
  /// a seq.
  @Test func aRelayedCandidatesAckIsUnnumberedAndNotReplayed() async throws {
    let server = try await TestServer { $0.ackDelay = 30 }
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    _ = try await alice.invite(call, to: "bob")
    _ = try await bob.expect(.invite)

    let before = alice.lastSeq
    alice.send(candidate(call, 1, id: "a1"))
    _ = try await bob.expect(.candidate)
    // Alice's ping carries the held ack out before its own answer, which is numbered next.
    let ping = alice.newID()
    alice.send(ClientEnvelope(id: ping, message: .ping(.init())))
    let ack = try await alice.next("ack of a1")
    #expect(ack.message.isAck && ack.message.replyTo == "a1" && ack.seq == nil)
    let pong = try await alice.next("ping answer")
    #expect(pong.message.replyTo == ping && pong.seq == before + 1)

    // Alice's socket dies; the resume re-sends nothing (the ack was not kept).
    let sessionId = try #require(alice.sessionId)
    alice.close()
    try await server.waitUntilOffline("alice", "phone")
    let again = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await again.hello(
      token: server.token("alice"), resume: .init(sessionId: sessionId, lastSeq: before))
    #expect(welcome.resumed)
    let resent = try await again.next("resent answer")
    #expect(resent.message.replyTo == ping && resent.seq == before + 1)

    // The same candidate sent again: Bob gets it again (adding it twice changes nothing in
    // ICE), Alice an ack again without a seq; her numbered messages run on from the pong.
    again.send(candidate(call, 1, id: "a1"))
    let copy = try await bob.expect(.candidate)
    if case .candidate(let relayed) = copy {
      #expect(relayed.callId == call && relayed.candidate == DialtoneServerTests.candidate(1))
    } else {
      Issue.record("not a candidate: \(copy)")
    }
    let ping2 = again.newID()
    again.send(ClientEnvelope(id: ping2, message: .ping(.init())))
    let repeated = try await again.next("ack of a1 again")
    #expect(repeated.message.isAck && repeated.message.replyTo == "a1" && repeated.seq == nil)
    let pong2 = try await again.next("ping answer")
    #expect(pong2.message.replyTo == ping2 && pong2.seq == before + 2)
    await server.stop()
  }
}
