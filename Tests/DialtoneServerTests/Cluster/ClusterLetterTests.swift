import DialtoneCalls
import DialtoneCluster
import DialtoneProtocol
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneSessions

/// What one node writes to another's inbox reads back as it was written; anything else is a
/// clear error, never a crash.
@Suite struct ClusterLetterTests {
  private let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice \"A\"\nSmith")

  @Test func everyKindOfLetterReadsBackAsWritten() throws {
    let letters: [ClusterLetter] = [
      .frame(sessionID: "s_x", seq: 7, bytes: Array(#"{"seq":7,"type":"ping"}"#.utf8) + [0x0A, 0x00]),
      .broken(sessionID: "s_y"),
      .request(
        ForwardedRequest(
          message: .accept(.init(callId: "c1", answer: SessionDescription(sdp: "v=0\r\n"))), id: "r\n1", from: alice,
          origin: .init(node: "n1-ab12", sessionID: "s_x"))),
      .reply(sessionID: "s_x", requestID: "r1", .ack(.init(replyTo: "r1", callId: "c1"))),
      .unstoredReply(
        sessionID: "s_x", requestID: "r1", bytes: Array(#"{"callId":"c1","replyTo":"r1","type":"ack"}"#.utf8)),
      .device(alice, connected: true, newSession: false),
      .device(Identity(userId: "bob", deviceId: "laptop", name: nil), connected: false, newSession: false),
      .replaced(alice, sessionID: "s_old"),
    ]
    for letter in letters {
      #expect(try ClusterLetterCodec.decode(ClusterLetterCodec.encode(letter)) == letter)
    }
  }

  @Test func aBrokenLetterIsAnErrorThatSaysWhat() {
    for bytes in [
      "", "{}", "{\"k\":\"nope\"}\n", "{\"k\":\"reply\",\"s\":\"x\"}\n{}", "no header",
      "{\"k\":\"unstored-reply\",\"s\":\"x\",\"r\":\"r1\"}\n",
      "{\"k\":\"frame\",\"s\":\"x\"}\n{}", "{\"k\":\"frame\",\"q\":0,\"s\":\"x\"}\n{}",
    ] {
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

  /// The request arrives and is answered with its ack, as the hub does a forwarded request.
  private func answer(_ id: String, in answers: inout ForwardedAnswers) {
    _ = answers.arrive(request(id))
    _ = answers.answered(request(id), .ack(.init(replyTo: id)))
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
    for id in ["r1", "r2", "r3"] { answer(id, in: &answers) }
    guard case .new = answers.arrive(request("r1")) else {
      Issue.record("r1 should be forgotten")
      return
    }
    guard case .answered = answers.arrive(request("r3")) else {
      Issue.record("r3 should be kept")
      return
    }
  }

  /// A forgotten answer (`forwardedDropped`) leaves the eviction order: the request's later
  /// answer takes its place at the end, and the answer after it evicts the oldest one remembered.
  @Test func aForgottenAnswerLeavesTheEvictionOrder() {
    var answers = ForwardedAnswers(capacity: 2)
    answer("r1", in: &answers)
    answers.forget(sessionID: "s1", requestID: "r1")
    answer("r2", in: &answers)
    answer("r1", in: &answers)  // forwarded again, handled afresh: newer than r2
    answer("r3", in: &answers)
    guard case .answered = answers.arrive(request("r1")) else {
      Issue.record("r1's later answer should be kept")
      return
    }
    guard case .new = answers.arrive(request("r2")) else {
      Issue.record("r2 is the oldest and should be let go")
      return
    }
  }

  @Test func answersForgottenAgainAndAgainKeepTheOrderBounded() {
    var answers = ForwardedAnswers(capacity: 4)
    for round in 0..<100 {
      let id = "r\(round % 3)"
      answer(id, in: &answers)
      answers.forget(sessionID: "s1", requestID: id)
      #expect(answers.orderCount <= 2 * answers.capacity)
    }
  }
}

@Suite struct OnceKeyTests {
  private let alice = Peer(userId: "alice", deviceId: "phone", name: nil)

  @Test func aRingMessageIsKeyedByWhatMakesItNewsAndNothingElseIsKeyed() {
    let invite = ServerMessage.invite(.init(callId: "c1", from: alice, video: false, offer: nil, createdAt: 1))
    let first = ServerMessage.candidate(.init(callId: "c1", from: alice, candidate: candidate(1)))
    var restarted = candidate(1)
    restarted.usernameFragment = "new"
    #expect(OnceKey.of(invite) == OnceKey.of(invite))
    #expect(OnceKey.of(first) == OnceKey.of(.candidate(.init(callId: "c1", from: alice, candidate: candidate(1)))))
    let distinct: [ServerMessage] = [
      invite, first,
      // An ICE restart's candidate, a leg's, another device's, another call's invite, an accept.
      .candidate(.init(callId: "c1", from: alice, candidate: restarted)),
      .candidate(.init(callId: "c1", from: alice, candidate: candidate(1), leg: true)),
      .candidate(.init(callId: "c1", from: Peer(userId: "alice", deviceId: "laptop"), candidate: candidate(1))),
      .invite(.init(callId: "c2", from: alice, video: false, offer: nil, createdAt: 1)),
      .accept(.init(callId: "c1", from: alice)),
    ]
    #expect(Set(distinct.compactMap(OnceKey.of)).count == distinct.count)
    #expect(OnceKey.of(.callEnded(.init(callId: "c1", reason: .hangup))) == nil)
  }
}

@Suite struct SessionPoisonTests {
  @Test func itKeepsWhatWasNotedBoundedUntilTakenAndTakesBackWhatFailed() {
    var poison = SessionPoison(capacity: 2)
    poison.add(session: "s1")
    poison.add(session: "s2")
    poison.add(session: "s3")
    poison.add(user: "bob")
    #expect(poison.sessions == ["s1", "s2"] && poison.users == ["bob"] && poison.overflowed == 1)
    let taken = poison.take()
    #expect(poison.isEmpty && poison.overflowed == 0)
    poison.merge(taken)
    #expect(poison.sessions == ["s1", "s2"] && poison.users == ["bob"])
  }
}
