import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// Answers group requests with scripted replies and records every message sent.
private final class FakeGroupSignaling: GroupSignaling, Sendable {
  private let sent = Locked<[ClientMessage]>([])
  private let reply: @Sendable (ClientMessage) -> ServerMessage

  init(reply: @escaping @Sendable (ClientMessage) -> ServerMessage) { self.reply = reply }

  var messages: [ClientMessage] { sent.current }
  var types: [String] { messages.map(\.type.rawValue) }

  func request(_ message: ClientMessage) async throws -> ServerMessage {
    sent.withLock { $0.append(message) }
    return reply(message)
  }

  func send(_ message: ClientMessage) async throws {
    sent.withLock { $0.append(message) }
  }
}

@Suite struct GroupCallTests {
  static let callId = "g-client-1"
  static let bob = Peer(userId: "bob", deviceId: "laptop")
  static let state = GroupCallState(
    callId: callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
    members: [GroupMember(userId: "alice", state: .joined), GroupMember(userId: "bob", state: .joined)])

  private func acking() -> FakeGroupSignaling {
    FakeGroupSignaling { message in .ack(.init(replyTo: "r", callId: message.callId, group: Self.state)) }
  }

  private func joined(_ signaling: FakeGroupSignaling, _ factory: EngineFakePeerConnectionFactory) async -> GroupCall {
    let call = GroupCall(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), iceServers: [], factory: factory,
      signaling: signaling)
    await call.start()
    return call
  }

  @Test func creatingSendsGroupCreateAndPublishesOnceTheMediaIsReady() async throws {
    let log = EngineLog()
    let factory = EngineFakePeerConnectionFactory(log: log)
    let signaling = acking()
    let call = await joined(signaling, factory)
    #expect(await call.state == .joined)
    // The publisher's connection and offer are made with the request; the offer waits for
    // group-media.
    #expect(factory.connections.count == 1)
    #expect(
      await eventually { factory.connections.first?.calls == ["createOffer(iceRestart: false)", "setLocal(offer)"] })
    #expect(signaling.types == ["group-create"])

    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    #expect(factory.connections.count == 1)
    guard case .groupOffer(let offer) = signaling.messages.last else {
      Issue.record("no publisher offer")
      return
    }
    #expect(offer.stream == "publisher" && offer.sdp == "offer-pc1-1")
    await call.handle(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: "answer-sfu")))
    #expect(factory.connections[0].calls.contains("setRemote(answer:answer-sfu)"))

    // The publisher's candidates are trickled on its stream.
    factory.connections[0].emitCandidate(IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 1 typ host"))
    factory.connections[0].emitCandidate(nil)
    #expect(
      await eventually {
        signaling.types.suffix(2) == ["group-candidate", "group-end-of-candidates"]
      })
    if case .groupCandidate(let c) = signaling.messages.dropLast().last { #expect(c.stream == "publisher") }
  }

  @Test func anOfferedStreamGetsItsOwnConnectionAndCandidatesWaitForItsDescription() async throws {
    let log = EngineLog()
    let factory = EngineFakePeerConnectionFactory(log: log)
    let signaling = acking()
    let call = await joined(signaling, factory)
    var events = call.events.makeAsyncIterator()

    await call.handle(.groupOffer(.init(callId: Self.callId, stream: "feed-9", sdp: "offer-sfu", from: Self.bob)))
    // (The first connection is the publisher's, made with the join.)
    #expect(factory.connections.count == 2)
    let receiver = try #require(factory.connections.last)
    #expect(receiver.calls.prefix(3) == ["setRemote(offer:offer-sfu)", "createAnswer", "setLocal(answer)"])
    guard case .groupAnswer(let answer) = signaling.messages.last else {
      Issue.record("no answer")
      return
    }
    #expect(answer.stream == "feed-9" && answer.sdp == "answer-pc2")
    await call.handle(
      .groupCandidate(.init(callId: Self.callId, stream: "feed-9", candidate: IceCandidate(candidate: "c-remote"))))
    #expect(receiver.calls.contains("addCandidate(c-remote)"))

    var added = false
    while let event = await events.next() {
      if case .remoteStreamAdded(let stream, let from, _) = event {
        #expect(stream == "feed-9" && from == Self.bob)
        added = true
        break
      }
    }
    #expect(added)

    // The stream's end closes its connection and says whose it was.
    await call.handle(.groupStreamEnded(.init(callId: Self.callId, stream: "feed-9")))
    #expect(receiver.calls.contains("close"))
    while let event = await events.next() {
      if case .remoteStreamRemoved(let stream, let from) = event {
        #expect(stream == "feed-9" && from == Self.bob)
        break
      }
    }
  }

  @Test func aVideoCallPublishesTheCameraSendOnlyAndReceivesEachParticipantsVideo() async throws {
    let log = EngineLog()
    let factory = EngineFakePeerConnectionFactory(log: log)
    let signaling = acking()
    let call = GroupCall(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), video: true, iceServers: [],
      factory: factory, signaling: signaling)
    await call.start()
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    // Before the first offer: webrtcbin 1.22 cannot change a negotiated direction.
    let publisher = factory.connections[0].calls
    #expect(publisher.prefix(3) == ["videoDirection(sendonly)", "video(true)", "createOffer(iceRestart: false)"])
    #expect(factory.configurations[0] == PeerConnectionConfiguration(iceServers: [], video: true, sendOnly: true))

    await call.handle(.groupOffer(.init(callId: Self.callId, stream: "feed-9", sdp: "offer-sfu", from: Self.bob)))
    #expect(
      factory.configurations[1] == PeerConnectionConfiguration(iceServers: [], video: true, remoteParticipant: Self.bob)
    )
    // A receive-only stream takes the offer's directions as they are.
    #expect(!factory.connections[1].calls.contains { $0.hasPrefix("video") })
    await call.leave()
  }

  @Test func anAudioCallsPublisherHasNoVideo() async throws {
    let factory = EngineFakePeerConnectionFactory(log: EngineLog())
    let call = await joined(acking(), factory)
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    #expect(factory.configurations == [PeerConnectionConfiguration(iceServers: [], video: false, sendOnly: true)])
    #expect(!factory.connections[0].calls.contains { $0.hasPrefix("video") })
    await call.leave()
  }

  @Test func candidatesThatComeBeforeTheAnswerAreAppliedAfterIt() async throws {
    let log = EngineLog()
    let factory = EngineFakePeerConnectionFactory(log: log)
    let signaling = acking()
    let call = await joined(signaling, factory)
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    await call.handle(
      .groupCandidate(.init(callId: Self.callId, stream: "publisher", candidate: IceCandidate(candidate: "early"))))
    let publisher = factory.connections[0]
    #expect(!publisher.calls.contains("addCandidate(early)"))
    await call.handle(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: "answer-sfu")))
    let calls = publisher.calls
    #expect(
      (calls.firstIndex(of: "setRemote(answer:answer-sfu)") ?? .max)
        < (calls.firstIndex(of: "addCandidate(early)") ?? -1))
  }

  @Test func leavingTellsTheServerAndClosesEveryConnection() async throws {
    let log = EngineLog()
    let factory = EngineFakePeerConnectionFactory(log: log)
    let signaling = acking()
    let call = await joined(signaling, factory)
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    await call.handle(.groupOffer(.init(callId: Self.callId, stream: "feed-9", sdp: "offer-sfu", from: Self.bob)))
    await call.setMuted(true)
    #expect(factory.connections[0].calls.contains("audio(false)"))
    await call.leave()
    #expect(signaling.types.contains("group-leave"))
    #expect(factory.connections.allSatisfy { $0.calls.contains("close") })
    #expect(await call.state == .ended(nil))
  }

  @Test func aRingIsAnsweredWithJoinOrDeclinedAndTheServersEndIsFinal() async throws {
    let invite = ServerMessage.GroupInvite(
      callId: Self.callId, from: Peer(userId: "alice", deviceId: "phone"), video: false, memberCount: 2,
      createdAt: 1, group: Self.state)
    let signaling = acking()
    let factory = EngineFakePeerConnectionFactory(log: EngineLog())
    let ringing = GroupCall(
      callId: Self.callId, entry: .invited(invite), iceServers: [], factory: factory, signaling: signaling)
    await ringing.start()
    #expect(await ringing.state == .ringing)
    #expect(signaling.types == ["group-ringing"])
    await ringing.decline()
    #expect(signaling.types == ["group-ringing", "group-decline"])
    #expect(await ringing.state == .ended(nil))

    let other = GroupCall(
      callId: Self.callId, entry: .invited(invite), iceServers: [], factory: factory, signaling: signaling)
    await other.start()
    await other.handle(.groupEnded(.init(callId: Self.callId, reason: .joinedElsewhere)))
    #expect(await other.state == .ended(.joinedElsewhere))
    // Nothing more happens once it ended.
    await other.join()
    #expect(signaling.types.filter { $0 == "group-join" }.isEmpty)
  }

  @Test func anInviteAndARemoveGoToTheServerAndARefusalReachesTheApp() async throws {
    let signaling = FakeGroupSignaling { message in
      if case .groupRemove = message {
        return .error(.init(replyTo: "r", code: .forbidden, message: "only the owner", callId: Self.callId))
      }
      return .ack(.init(replyTo: "r", callId: message.callId, group: Self.state))
    }
    let call = await joined(signaling, EngineFakePeerConnectionFactory(log: EngineLog()))
    var events = call.events.makeAsyncIterator()
    await call.invite(["dave", "erin"])
    await call.remove("bob")
    #expect(signaling.types == ["group-create", "group-invite", "group-remove"])
    if case .groupInvite(let invite) = signaling.messages[1] { #expect(invite.members == ["dave", "erin"]) }
    if case .groupRemove(let remove) = signaling.messages[2] { #expect(remove.userId == "bob") }
    var refusal: String?
    while let event = await events.next() {
      if case .error(let text) = event {
        refusal = text
        break
      }
    }
    #expect(refusal == "forbidden: only the owner")
    #expect(await call.state == .joined)
  }

  @Test func liveKitMediaIsHandedToTheApp() async throws {
    let call = await joined(acking(), EngineFakePeerConnectionFactory(log: EngineLog()))
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .livekit, url: "wss://lk.test", token: "tok")))
    var events = call.events.makeAsyncIterator()
    while let event = await events.next() {
      if case .liveKit(let url, let token) = event {
        #expect(url == "wss://lk.test" && token == "tok")
        return
      }
    }
    Issue.record("no liveKit event")
  }

  @Test func aRefusedJoinEndsTheCallWithTheServersReason() async throws {
    let signaling = FakeGroupSignaling { _ in
      .error(.init(replyTo: "r", code: .notFound, message: "no such call", callId: Self.callId))
    }
    let call = GroupCall(
      callId: Self.callId, entry: .join, iceServers: [], factory: EngineFakePeerConnectionFactory(log: EngineLog()),
      signaling: signaling)
    #expect(await call.start() == nil)
    #expect(await call.state == .ended(nil))
    var events = call.events.makeAsyncIterator()
    var message: String?
    while let event = await events.next() {
      if case .error(let text) = event { message = text }
    }
    #expect(message?.contains("not-found") == true)
  }
}

/// The shell runs the recovery's timers on the injected clock (virtual time): a publisher that
/// cannot restart ICE is replaced once the disconnected grace has passed, not before.
@Suite struct GroupCallRecoveryTimerTests {
  static let callId = "g-client-2"
  static let state = GroupCallState(
    callId: callId, creatorId: "alice", video: false, state: .active, createdAt: 1,
    members: [GroupMember(userId: "alice", state: .joined), GroupMember(userId: "bob", state: .joined)])

  @Test func aDisconnectedPublisherIsReplacedAfterTheGraceOnTheClock() async throws {
    let clock = ManualClock()
    let factory = EngineFakePeerConnectionFactory(log: EngineLog(), canRestartIce: false)
    let signaling = FakeGroupSignaling { message in .ack(.init(replyTo: "r", callId: message.callId, group: Self.state))
    }
    let call = GroupCall(
      callId: Self.callId, entry: .create(members: ["bob"], title: nil), iceServers: [], factory: factory,
      signaling: signaling, clock: clock)
    await call.start()
    await call.handle(.groupMedia(.init(callId: Self.callId, sfu: .janus)))
    await call.handle(.groupAnswer(.init(callId: Self.callId, stream: "publisher", sdp: "answer-1")))
    factory.connections[0].emitState(.connected)
    factory.connections[0].emitState(.disconnected)
    #expect(await clock.waitForTimer(dueIn: 4))
    clock.advance(by: 3.9)
    #expect(factory.connections.count == 1)
    clock.advance(by: 0.1)
    #expect(await eventually { factory.connections.count == 2 })
    #expect(
      await eventually {
        signaling.messages.contains {
          if case .groupOffer(let m) = $0 { return m.restart == .connection }
          return false
        }
      })
    #expect(factory.connections[0].calls.contains("close"))
  }
}
