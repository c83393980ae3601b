import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

private let offerSDP = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
private let answerSDP = "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"

func candidate(_ n: Int) -> IceCandidate {
  IceCandidate(
    candidate: "candidate:\(n) 1 udp 2122260223 192.168.1.\(n) 5\(n)000 typ host", sdpMid: "0", sdpMLineIndex: 0)
}

func callID(_ prefix: String = "c") -> CallID { prefix + "-" + UUID().uuidString.lowercased() }

extension SignalingProbe {
  func invite(_ callId: CallID, to user: String, offer: Bool = true) async throws -> ServerMessage {
    try await request(
      .invite(.init(callId: callId, to: user, video: false, offer: offer ? SessionDescription(sdp: offerSDP) : nil)))
  }
  func act(_ message: ClientMessage) async throws -> ServerMessage { try await request(message) }
  func candidateFor(_ callId: CallID, _ n: Int) async throws -> ServerMessage {
    try await request(.candidate(.init(callId: callId, candidate: candidate(n))))
  }
  /// Proves nothing else is queued for this socket: the next message is the ping's answer.
  func expectQuiet() async throws {
    let answer = try await request(.ping(.init()))
    #expect(answer.isAck)
  }

  /// The next messages are the candidates `numbers` (`candidate(n)`), in order, numbered from
  /// `firstSeq` on.
  func expectCandidates(
    _ numbers: ClosedRange<Int>, from firstSeq: UInt64, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    for (offset, n) in numbers.enumerated() {
      let envelope = try await next("candidate \(n)")
      #expect(envelope.seq == firstSeq + UInt64(offset), sourceLocation: sourceLocation)
      guard case .candidate(let c) = envelope.message else {
        throw ProbeFailure(description: "expected candidate \(n), got \(envelope.message)")
      }
      #expect(c.candidate == candidate(n), sourceLocation: sourceLocation)
    }
  }

  /// The answer (`ack` or `error`) to request `id`, past whatever else comes first.
  func answer(to id: String, _ what: String) async throws -> ServerMessage {
    while true {
      let message = try await next(what).message
      if message.replyTo == id { return message }
    }
  }
}

extension TestServer {
  func waitUntilOffline(_ user: String, _ device: String) async throws {
    for _ in 0..<500 {
      if await !server.hub.liveDevices(of: user).contains(where: { $0.deviceId == device }) { return }
      try await Task.sleep(for: .milliseconds(5))
    }
    throw ProbeFailure(description: "\(user)/\(device) still online")
  }
}

/// Bob calls Alice, and Alice calls Bob while his call rings her (`newerWins`: hers has the lower
/// callId): both are told the loser ended with `glare`, replaced by the survivor.
func glare(_ alice: SignalingProbe, _ bob: SignalingProbe, newerWins: Bool) async throws -> (
  loser: CallID, survivor: CallID
) {
  let bobsCall = newerWins ? callID("b") : callID("a")
  let alicesCall = newerWins ? callID("a") : callID("b")
  #expect(try await bob.invite(bobsCall, to: "alice").isAck)
  #expect(try await alice.expect(.invite).callId == bobsCall)
  #expect(try await alice.invite(alicesCall, to: "bob").isAck)
  let (loser, survivor) = newerWins ? (bobsCall, alicesCall) : (alicesCall, bobsCall)
  for probe in [alice, bob] {
    guard case .callEnded(let ended) = try await probe.expect(.callEnded) else { return (loser, survivor) }
    #expect(ended.callId == loser && ended.reason == .glare && ended.replacedBy == survivor)
  }
  return (loser, survivor)
}

/// Alice calls Bob, who answers: both have read the accept.
private func answeredCall(_ server: CallFlowStack) async throws -> (SignalingProbe, SignalingProbe, CallID) {
  let alice = try await server.connect("alice")
  let bob = try await server.connect("bob")
  let call = callID()
  _ = try await alice.invite(call, to: "bob")
  _ = try await bob.expect(.invite)
  _ = try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: answerSDP))))
  _ = try await alice.expect(.accept)
  return (alice, bob, call)
}

/// Alice calls Bob, whose phone and laptop both ring.
private func ringingOnTwoDevices(_ server: CallFlowStack) async throws -> (
  SignalingProbe, SignalingProbe, SignalingProbe, CallID
) {
  let alice = try await server.connect("alice")
  let bobPhone = try await server.connect("bob", device: "phone")
  let bobLaptop = try await server.connect("bob", device: "laptop")
  let call = callID()
  _ = try await alice.invite(call, to: "bob")
  _ = try await bobPhone.expect(.invite)
  _ = try await bobLaptop.expect(.invite)
  return (alice, bobPhone, bobLaptop, call)
}

/// Every call flow runs on one server and on a cluster of three nodes whose users sit on
/// different nodes (`CallFlowStack`): the cluster must behave as one server.
@Suite(.scratchPostgres, .scratchRedis, .serialized) struct CallFlowTests {
  @Test(arguments: Deployment.allCases) func acceptWithTrickleAndAnsweredElsewhere(_ deployment: Deployment)
    async throws
  {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice", device: "phone", name: "Alice")
      let bobPhone = try await server.connect("bob", device: "phone")
      let bobLaptop = try await server.connect("bob", device: "laptop")
      let call = callID()

      let ack = try await alice.invite(call, to: "bob")
      #expect(ack.isAck && ack.callId == call)
      for bob in [bobPhone, bobLaptop] {
        guard case .invite(let invite) = try await bob.expect(.invite) else { return }
        #expect(invite.from == Peer(userId: "alice", deviceId: "phone", name: "Alice"))
        #expect(invite.offer?.sdp == offerSDP)
      }
      #expect(try await bobPhone.act(.ringing(.init(callId: call))).isAck)
      guard case .ringing(let ringing) = try await alice.expect(.ringing) else { return }
      #expect(ringing.from.deviceId == "phone")

      // Caller candidates trickle to every ringing device.
      #expect(try await alice.candidateFor(call, 1).isAck)
      for bob in [bobPhone, bobLaptop] { #expect(try await bob.expect(.candidate).callId == call) }

      #expect(
        try await bobPhone.act(.accept(.init(callId: call, answer: SessionDescription(sdp: answerSDP)))).isAck)
      guard case .accept(let accepted) = try await alice.expect(.accept) else { return }
      #expect(accepted.answer?.sdp == answerSDP && accepted.from.deviceId == "phone")
      #expect(try await bobLaptop.expect(.callEnded).endReason == .answeredElsewhere)

      // After accept only the answering device is in the call, both ways.
      #expect(try await bobPhone.candidateFor(call, 2).isAck)
      guard case .candidate(let fromBob) = try await alice.expect(.candidate) else { return }
      #expect(fromBob.candidate == candidate(2))
      #expect(try await alice.candidateFor(call, 3).isAck)
      guard case .candidate(let toBob) = try await bobPhone.expect(.candidate) else { return }
      #expect(toBob.candidate == candidate(3))
      try await bobLaptop.expectQuiet()
      #expect(try await bobLaptop.candidateFor(call, 4).errorCode == .invalidState)

      #expect(try await alice.act(.hangup(.init(callId: call))).isAck)
      guard case .callEnded(let ended) = try await bobPhone.expect(.callEnded) else { return }
      #expect(ended.reason == .hangup && ended.from?.userId == "alice")
    }
  }

  @Test(arguments: Deployment.allCases) func declineEndsTheCallOnEveryDevice(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let (alice, bobPhone, bobLaptop, call) = try await ringingOnTwoDevices(server)
      #expect(try await bobLaptop.act(.decline(.init(callId: call))).isAck)
      #expect(try await alice.expect(.callEnded).endReason == .declined)
      #expect(try await bobPhone.expect(.callEnded).endReason == .declinedElsewhere)
      #expect(try await bobPhone.act(.accept(.init(callId: call))).errorCode == .invalidState)
    }
  }

  @Test(arguments: Deployment.allCases) func busyDeviceAndBusyCallee(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      let bobPhone = try await server.connect("bob", device: "phone")
      let bobLaptop = try await server.connect("bob", device: "laptop")
      let carol = try await server.connect("carol")

      // A device that is busy (say, in a cellular call) ends the call as busy.
      let first = callID()
      _ = try await alice.invite(first, to: "bob")
      _ = try await bobPhone.expect(.invite)
      _ = try await bobLaptop.expect(.invite)
      #expect(try await bobPhone.act(.busy(.init(callId: first))).isAck)
      #expect(try await alice.expect(.callEnded).endReason == .busy)
      #expect(try await bobLaptop.expect(.callEnded).endReason == .declinedElsewhere)

      // Bob talks to Carol; Alice's new call is busy at once and Bob's devices never ring.
      let talk = callID()
      _ = try await carol.invite(talk, to: "bob")
      _ = try await bobPhone.expect(.invite)
      _ = try await bobLaptop.expect(.invite)
      _ = try await bobPhone.act(.accept(.init(callId: talk, answer: SessionDescription(sdp: answerSDP))))
      _ = try await carol.expect(.accept)
      _ = try await bobLaptop.expect(.callEnded)

      let second = callID()
      #expect(try await alice.invite(second, to: "bob").isAck)
      #expect(try await alice.expect(.callEnded).endReason == .busy)
      try await bobPhone.expectQuiet()
      try await bobLaptop.expectQuiet()
    }
  }

  @Test(arguments: Deployment.allCases) func unansweredCallIsMissedAfterTheRingTimeout(_ deployment: Deployment)
    async throws
  {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      let call = callID()
      _ = try await alice.invite(call, to: "bob")
      _ = try await bob.expect(.invite)
      try #require(await server.waitForTimer(dueIn: 45))
      server.advance(by: 44)
      try await bob.expectQuiet()
      server.advance(by: 1.5)
      #expect(try await alice.expect(.callEnded).endReason == .missed)
      #expect(try await bob.expect(.callEnded).endReason == .missed)
    }
  }

  @Test(arguments: Deployment.allCases) func callerCancelsWhileRinging(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let (alice, bobPhone, bobLaptop, call) = try await ringingOnTwoDevices(server)
      #expect(try await alice.act(.cancel(.init(callId: call))).isAck)
      #expect(try await bobPhone.expect(.callEnded).endReason == .cancelled)
      #expect(try await bobLaptop.expect(.callEnded).endReason == .cancelled)
    }
  }

  /// A calls B while B's call to A still rings: the lower callId survives, either way round.
  @Test(arguments: Deployment.allCases, [true, false])
  func glareKeepsTheLowerCallId(_ deployment: Deployment, _ newerWins: Bool) async throws {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      let survivor = try await glare(alice, bob, newerWins: newerWins).survivor
      // Alice's call survived: Bob is rung with it.
      if newerWins { #expect(try await bob.expect(.invite).callId == survivor) }
    }
  }

  @Test(arguments: Deployment.allCases) func lateCalleeDeviceGetsTheOfferAndEveryCandidateInOrder(
    _ deployment: Deployment
  ) async throws {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      let call = callID()
      _ = try await alice.invite(call, to: "bob")
      for n in 1...5 { #expect(try await alice.candidateFor(call, n).isAck) }
      #expect(try await alice.act(.endOfCandidates(.init(callId: call))).isAck)

      // The phone wakes from a push and connects now.
      let bob = try await server.connect("bob", device: "phone")
      guard case .invite(let invite) = try await bob.expect(.invite) else { return }
      #expect(invite.offer?.sdp == offerSDP)
      for n in 1...5 {
        guard case .candidate(let c) = try await bob.expect(.candidate) else { return }
        #expect(c.candidate == candidate(n))
      }
      _ = try await bob.expect(.endOfCandidates)
      guard case .ack(let state) = try await bob.act((.getCall(.init(callId: call)))) else { return }
      #expect(state.call?.state == .ringing)
    }
  }

  @Test(arguments: Deployment.allCases) func droppedSocketResumesAndEveryCandidateArrivesExactlyOnce(
    _ deployment: Deployment
  ) async throws {
    try await CallFlowStack.with(deployment) { server in
      let (alice, bob, call) = try await answeredCall(server)
      bob.ack()

      // Bob's socket dies mid-call; Alice keeps trickling.
      let sessionId = try #require(bob.sessionId)
      let lastSeq = bob.lastSeq
      bob.close()
      _ = try await bob.closeCode()
      try await server.waitUntilOffline("bob", "phone")
      for n in 1...4 { #expect(try await alice.candidateFor(call, n).isAck) }

      let back = try server.socket(for: "bob")
      let welcome = try await back.hello(
        token: server.token("bob"), resume: .init(sessionId: sessionId, lastSeq: lastSeq))
      #expect(welcome.resumed && welcome.sessionId == sessionId)
      var received: [IceCandidate] = []
      for _ in 1...4 {
        guard case .candidate(let c) = try await back.expect(.candidate) else { return }
        received.append(c.candidate)
      }
      #expect(received == (1...4).map(candidate))
      try await back.expectQuiet()

      // A request re-sent with its original id after the resume has no second effect. (A copy
      // sent while the first is still being answered, on its way to the call's node in a
      // cluster, gets that one answer: JournalOrderingTests, CallPlacementSeamTests.)
      back.send(ClientEnvelope(id: "dup-1", message: .mediaState(.init(callId: call, camera: false))))
      #expect(try await back.next().message.replyTo == "dup-1")
      back.send(ClientEnvelope(id: "dup-1", message: .mediaState(.init(callId: call, camera: false))))
      #expect(try await back.next().message.replyTo == "dup-1")
      #expect(try await alice.expect(.mediaState).callId == call)
      try await alice.expectQuiet()

      // But a candidate's repeat, on one server, is handled afresh (protocol.md 5.3): relayed
      // again, which changes nothing in ICE. A store-first cluster numbers, stores and remembers
      // its ack, and answers the repeat from memory (the call's node, for a forwarded one).
      for _ in 1...2 {
        back.send(ClientEnvelope(id: "dup-2", message: .candidate(.init(callId: call, candidate: candidate(9)))))
        #expect(try await back.next().message.replyTo == "dup-2")
      }
      for _ in 1...(deployment == .single ? 2 : 1) {
        guard case .candidate(let c) = try await alice.expect(.candidate) else { return }
        #expect(c.candidate == candidate(9))
      }
      try await alice.expectQuiet()
    }
  }

  @Test(arguments: Deployment.allCases) func resumeBeyondTheWindowIsAResync(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let bob = try await server.connect("bob")
      let sessionId = try #require(bob.sessionId)
      bob.close()
      _ = try await bob.closeCode()
      try await server.waitUntilOffline("bob", "phone")
      try #require(await server.waitForTimer(dueIn: 60))
      server.advance(by: 61)
      let back = try server.socket(for: "bob")
      let welcome = try await back.hello(token: server.token("bob"), resume: .init(sessionId: sessionId, lastSeq: 0))
      #expect(!welcome.resumed && welcome.resync && welcome.sessionId != sessionId)

      let stranger = try server.socket(for: "mallory", device: "x")
      let other = try await stranger.hello(
        token: server.token("mallory", device: "x"), resume: .init(sessionId: welcome.sessionId, lastSeq: 0))
      #expect(other.resync && other.sessionId != welcome.sessionId)
    }
  }

  @Test(arguments: Deployment.allCases) func droppedParticipantEndsTheCallAfterTheGraceWindow(_ deployment: Deployment)
    async throws
  {
    try await CallFlowStack.with(deployment) { server in
      let (alice, bob, _) = try await answeredCall(server)
      bob.close()
      _ = try await bob.closeCode()
      try await server.waitUntilOffline("bob", "phone")
      try #require(await server.waitForTimer(dueIn: 30))  // the grace window, on the call's node
      server.advance(by: 29)
      try await alice.expectQuiet()
      server.advance(by: 2)
      guard case .callEnded(let ended) = try await alice.expect(.callEnded) else { return }
      #expect(ended.reason == .connectionLost && ended.from?.userId == "bob")
    }
  }

  @Test(arguments: Deployment.allCases) func strangersCanNeitherReadNorInject(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      let eve = try await server.connect("eve")
      let call = callID()
      _ = try await alice.invite(call, to: "bob")
      _ = try await bob.expect(.invite)

      #expect(try await eve.candidateFor(call, 1).errorCode == .notFound)
      #expect(try await eve.act(.getCall(.init(callId: call))).errorCode == .notFound)
      #expect(try await eve.act(.accept(.init(callId: call))).errorCode == .notFound)
      #expect(try await eve.act(.hangup(.init(callId: call))).errorCode == .notFound)
      #expect(try await eve.act(.getCall(.init(callId: "no-such-call"))).errorCode == .notFound)
      // Same answer for a call that does not exist and one that is not yours: nothing leaks.
      #expect(try await bob.act(.offer(.init(callId: call, sdp: offerSDP))).errorCode == .invalidState)
      #expect(try await eve.invite(call, to: "bob").errorCode == .conflict)
      #expect(try await alice.invite(callID(), to: "alice").errorCode == .badRequest)
      try await bob.expectQuiet()
    }
  }

  @Test(arguments: Deployment.allCases) func malformedSignalingGetsErrors(_ deployment: Deployment) async throws {
    try await CallFlowStack.with(deployment) { server in
      let alice = try await server.connect("alice")
      alice.sendRaw(#"{"type":"candidate","id":"m1","callId":"c1","candidate":{"candidate":["x"]}}"#)
      let wrongType = try await alice.next().message
      #expect(wrongType.errorCode == .badRequest && wrongType.replyTo == "m1")
      alice.sendRaw(
        #"{"type":"offer","id":"m2","callId":"c1","sdp":""# + String(repeating: "a", count: 40_000) + #""}"#)
      let tooLarge = try await alice.next().message
      #expect(tooLarge.errorCode == .tooLarge && tooLarge.replyTo == "m2")
      alice.sendRaw(
        #"{"type":"candidate","id":"m3","callId":"c1","candidate":{"candidate":""# + String(repeating: "a", count: 2000)
          + #""}}"#)
      #expect(try await alice.next().message.errorCode == .tooLarge)
      alice.sendRaw(#"{"type":"invite","id":"m4","callId":"c1","to":42,"video":false}"#)
      #expect(try await alice.next().message.errorCode == .badRequest)
      try await alice.expectQuiet()
    }
  }

  @Test func historyIsPrivatePagedAndSurvivesARestart() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-history-\(UUID().uuidString)"
    var server = try await TestServer(dataDirectory: directory)
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    var ids: [CallID] = []
    for n in 0..<3 {
      let call = callID()
      ids.append(call)
      _ = try await alice.invite(call, to: "bob")
      _ = try await bob.expect(.invite)
      if n == 0 {
        _ = try await bob.act(.accept(.init(callId: call, answer: SessionDescription(sdp: answerSDP))))
        _ = try await alice.expect(.accept)
        server.clock.advance(by: 3)
        _ = try await alice.act(.hangup(.init(callId: call)))
        _ = try await bob.expect(.callEnded)
      } else {
        _ = try await bob.act(.decline(.init(callId: call)))
        _ = try await alice.expect(.callEnded)
      }
      server.clock.advance(by: 1)
    }
    await server.server.stop()
    await server.client.shutdown()

    server = try await TestServer(dataDirectory: directory)
    let page1 = try await server.http("GET", "/v1/calls?limit=2", token: server.token("alice"))
    #expect(page1.status == 200)
    let first = page1.json?["calls"]?.arrayValue ?? []
    #expect(first.compactMap { $0["callId"]?.stringValue } == [ids[2], ids[1]])
    #expect(first.first?["endReason"]?.stringValue == "declined")
    let next = try #require(page1.json?["next"]?.stringValue)
    let page2 = try await server.http("GET", "/v1/calls?limit=2&before=\(next)", token: server.token("alice"))
    let second = page2.json?["calls"]?.arrayValue ?? []
    #expect(second.compactMap { $0["callId"]?.stringValue } == [ids[0]])
    #expect(second.first?["answeredBy"]?.stringValue == "phone")
    #expect(second.first?["durationMs"]?.intValue == 3000)
    #expect(page2.json?["next"] == nil)

    let bobs = try await server.http("GET", "/v1/calls", token: server.token("bob"))
    #expect(bobs.json?["calls"]?.arrayValue?.count == 3)
    let carols = try await server.http("GET", "/v1/calls", token: server.token("carol"))
    #expect(carols.json?["calls"]?.arrayValue?.isEmpty == true)
    #expect(try await server.http("GET", "/v1/calls?limit=0", token: server.token("alice")).status == 400)
    #expect(try await server.http("GET", "/v1/calls?before=zzz", token: server.token("alice")).status == 400)
    await server.stop()
  }

  @Test func iceServersComeWithWelcomeAndOverHTTP() async throws {
    let server = try await TestServer { config in
      config.turnSecret = "coturn-secret"
      config.turnURLs = [
        "turn:127.0.0.1:3478?transport=udp", "turn:127.0.0.1:3478?transport=tcp",
        "turns:turn.example:443?transport=tcp",
      ]
      config.stunURLs = ["stun:127.0.0.1:3478"]
    }
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await probe.hello(token: server.token("alice"))
    #expect(welcome.iceServers.count == 2)
    #expect(welcome.iceServers[1].username?.hasSuffix(":alice") == true)
    let http = try await server.http("GET", "/v1/ice-servers", token: server.token("alice"))
    #expect(http.json?["ttl"]?.intValue == 43_200)
    #expect(http.json?["iceServers"]?.arrayValue?.count == 2)
    #expect(try await server.http("GET", "/v1/ice-servers").status == 401)
    await server.stop()
  }
}
