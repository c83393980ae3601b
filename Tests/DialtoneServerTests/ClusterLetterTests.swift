import DialtoneProtocol
import Testing

@testable import DialtoneServer

/// What one node writes to another's inbox reads back as it was written; anything else is a
/// clear error, never a crash.
@Suite struct ClusterLetterTests {
  private let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice \"A\"\nSmith")

  @Test func everyKindOfLetterReadsBackAsWritten() throws {
    let letters: [ClusterLetter] = [
      .delivery(
        .candidate(.init(callId: "c1", from: alice.peer, candidate: candidate(1))),
        userId: "bob", deviceIds: ["phone", "laptop"]),
      .request(
        ForwardedRequest(
          message: .accept(.init(callId: "c1", answer: SessionDescription(sdp: "v=0\r\n"))), id: "r\n1", from: alice,
          origin: .init(node: "n1-ab12", sessionID: "s_x"))),
      .reply(sessionID: "s_x", requestID: "r1", .ack(.init(replyTo: "r1", callId: "c1"))),
      .device(alice, connected: true, newSession: false),
      .device(Identity(userId: "bob", deviceId: "laptop", name: nil), connected: false, newSession: false),
      .replaced(alice, sessionID: "s_old"),
    ]
    for letter in letters {
      #expect(try ClusterLetterCodec.decode(ClusterLetterCodec.encode(letter)) == letter)
    }
  }

  @Test func aBrokenLetterIsAnErrorThatSaysWhat() {
    for bytes in ["", "{}", "{\"k\":\"nope\"}\n", "{\"k\":\"reply\",\"s\":\"x\"}\n{}", "no header"] {
      #expect(throws: ClusterLetterCodec.Malformed.self) { try ClusterLetterCodec.decode(Array(bytes.utf8)) }
    }
  }
}

@Suite struct ForwardedAnswersTests {
  private func request(_ id: String) -> ForwardedRequest {
    ForwardedRequest(
      message: .ping(.init()), id: id, from: Identity(userId: "a", deviceId: "d", name: nil),
      origin: .init(node: "n1", sessionID: "s1"))
  }

  @Test func aRepeatWaitsForTheAnswerAndThenGetsIt() {
    var answers = ForwardedAnswers()
    guard case .new = answers.arrive(request("r1")) else {
      Issue.record("first arrival")
      return
    }
    guard case .inFlight = answers.arrive(request("r1")) else {
      Issue.record("repeat in flight")
      return
    }
    #expect(answers.answered(request("r1"), .ack(.init(replyTo: "r1"))).map(\.id) == ["r1"])
    guard case .answered(let reply) = answers.arrive(request("r1")) else {
      Issue.record("answered")
      return
    }
    #expect(reply.replyTo == "r1")
  }

  @Test func itRemembersAtMostItsCapacityOldestOut() {
    var answers = ForwardedAnswers(capacity: 2)
    for id in ["r1", "r2", "r3"] {
      _ = answers.arrive(request(id))
      _ = answers.answered(request(id), .ack(.init(replyTo: id)))
    }
    guard case .new = answers.arrive(request("r1")) else {
      Issue.record("r1 should be forgotten")
      return
    }
    guard case .answered = answers.arrive(request("r3")) else {
      Issue.record("r3 should be kept")
      return
    }
  }
}

@Suite struct RingReplayFilterTests {
  private let alice = Peer(userId: "alice", deviceId: "phone", name: nil)

  private func admit(_ filter: inout RingReplayFilter, _ message: ServerMessage) -> Bool { filter.admit(message) }

  @Test func aSecondCopyOfARingIsDroppedButNothingElse() {
    var filter = RingReplayFilter()
    let invite = ServerMessage.invite(.init(callId: "c1", from: alice, video: false, offer: nil, createdAt: 1))
    let first = ServerMessage.candidate(.init(callId: "c1", from: alice, candidate: candidate(1)))
    var restarted = candidate(1)
    restarted.usernameFragment = "new"
    #expect(admit(&filter, invite))
    #expect(admit(&filter, first))
    #expect(!admit(&filter, invite))
    #expect(!admit(&filter, first))
    // An ICE restart's candidate, another call's invite and everything else pass.
    #expect(admit(&filter, .candidate(.init(callId: "c1", from: alice, candidate: restarted))))
    #expect(admit(&filter, .invite(.init(callId: "c2", from: alice, video: false, offer: nil, createdAt: 1))))
    let ended = ServerMessage.callEnded(.init(callId: "c1", reason: .hangup))
    #expect(admit(&filter, ended))
    #expect(admit(&filter, ended))
  }

  @Test func aSecondCopyOfAnAcceptIsDropped() {
    var filter = RingReplayFilter()
    let accept = ServerMessage.accept(.init(callId: "c1", from: alice))
    #expect(admit(&filter, accept))
    #expect(!admit(&filter, accept))
    #expect(admit(&filter, .accept(.init(callId: "c2", from: alice))))
  }
}
