import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let groupId = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
private let groupUUID = UUID(uuidString: groupId) ?? UUID()

/// A fake `GroupMediaControl` (LiveKit's SDK on iOS) that records what the session asks of it.
private final class RecordingGroupMedia: GroupMediaControl, Sendable {
  private let entries = Locked<[String]>([])
  var log: [String] { entries.current }
  func saw(_ entry: String) async -> Bool { await eventually { self.log.contains(entry) } }

  func connect(callId: CallID, url: String, token: String, video: Bool, muted: Bool) {
    entries.withLock { $0.append("connect(\(url), \(token), muted: \(muted))") }
  }
  func setMuted(callId: CallID, muted: Bool) { entries.withLock { $0.append("muted(\(muted))") } }
  func disconnect(callId: CallID) { entries.withLock { $0.append("disconnect") } }
  func audioSessionActivated() { entries.withLock { $0.append("audioOn") } }
  func audioSessionDeactivated() { entries.withLock { $0.append("audioOff") } }
}

/// Bob's phone: a SystemCallSession against a scripted server (group calls need an SFU, which
/// cannot run in these tests), fake peer connections, the fake OS and a fake LiveKit.
private struct GroupPhone {
  let session: SystemCallSession
  let os: FakeOS
  let factory: EngineFakePeerConnectionFactory
  let server: ScriptedServer
  let liveKit: RecordingGroupMedia
  let events: Locked<[SystemCallSession.GroupEvent]>
  /// Each `group-join`'s `multistream`.
  let joins = Locked<[Bool]>([])

  init() {
    server = ScriptedServer(userId: "bob", deviceId: "bob-phone")
    var configuration = SignalingClient.Configuration(url: "ws://scripted.invalid/v1/ws")
    configuration.backoff = [.milliseconds(50)]
    let signaling = SignalingClient(configuration: configuration, transport: server) { "token" }
    os = FakeOS(clock: SystemClock())
    factory = EngineFakePeerConnectionFactory(log: EngineLog())
    liveKit = RecordingGroupMedia()
    session = SystemCallSession(
      signaling: signaling, iceServers: IceServerCache(defaults: []), factory: factory, ui: os.ui,
      media: RecordingMedia(log: os.log), deviceId: "bob-phone", groupMedia: liveKit)
    os.attach(session)
    session.start()
    let events = Locked<[SystemCallSession.GroupEvent]>([])
    let stream = session.groupEvents
    Task { for await event in stream { events.withLock { $0.append(event) } } }
    self.events = events
  }

  /// The server rings Bob's connected phone with a group-invite from Alice.
  func invite(_ id: CallID = groupId) {
    let state = groupState(.ringing, bob: .invited, id: id)
    server.push(
      .groupInvite(
        .init(
          callId: id, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: false, title: "Standup",
          memberCount: 3, createdAt: 1_732_880_000_000, group: state)))
  }

  /// `get-group` answers with `state`, `group-join` with Bob joined on this phone.
  func answerRequests(getGroup state: GroupCallState?) {
    let joins = joins
    server.onRequest { message, id in
      switch message {
      case .getGroup(let m):
        guard let state else {
          return .error(.init(replyTo: id, code: .notFound, message: "no such call", callId: m.callId))
        }
        return .ack(.init(replyTo: id, callId: m.callId, group: state))
      case .groupJoin(let m):
        joins.withLock { $0.append(m.multistream) }
        return .ack(
          .init(replyTo: id, callId: m.callId, group: groupState(.active, bob: .joined, bobDevice: "bob-phone")))
      default:
        return nil
      }
    }
  }

  /// Goes online and waits for the server's welcome.
  func online() async {
    await session.goOnline()
    _ = await eventually { server.welcomed > 0 }
  }

  func reports() -> Int { os.entries.count { if case .reportIncoming = $0 { true } else { false } } }

  func stop() async { await session.stop() }
}

@Suite(.serialized) struct SystemCallGroupSessionTests {
  // Rule 1 for a group push: reported before receiveVoIPPush returns, with the title; only then
  // does the device connect and ask get-group; a call the creator cancelled meanwhile is ended
  // on screen as remote-ended, and nothing is sent for it.
  @Test func aGroupPushIsReportedAtOnceAndACallCancelledMeanwhileEnds() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: groupState(.ended, bob: .missed, reason: .cancelled))
    #expect(bob.session.receiveVoIPPush(groupPushPayload()))
    #expect(bob.os.entries.first == .reportIncoming(groupUUID, handle: "alice", name: "Standup", video: false))

    #expect(await eventually { bob.server.saw(.getGroup, groupId) })
    #expect(await bob.os.saw(.ended(groupUUID, .remoteEnded)))
    #expect(await eventually { await bob.session.calls.isEmpty })
    #expect(!bob.server.saw(.groupDecline) && !bob.server.saw(.groupJoin))
    await bob.stop()
  }

  // The same for a ring joined on Bob's tablet before the phone connected: answered elsewhere.
  @Test func aGroupPushJoinedElsewhereMeanwhileEndsAsAnsweredElsewhere() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: groupState(.active, bob: .joined, bobDevice: "bob-tablet"))
    #expect(bob.session.receiveVoIPPush(groupPushPayload()))
    #expect(await bob.os.saw(.ended(groupUUID, .answeredElsewhere)))
    await bob.stop()
  }

  // A push and the group-invite the server replays once the device connects: one report, the
  // call rings on, and the ring stops when Bob's tablet joins (answered elsewhere).
  @Test func aPushAndItsReplayedInviteReportOnceAndJoinedElsewhereEndsTheRing() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: groupState(.ringing, bob: .invited))
    #expect(bob.session.receiveVoIPPush(groupPushPayload()))
    #expect(await eventually { bob.server.saw(.getGroup, groupId) })
    bob.invite()
    // The invite made the ring's GroupCall, which tells the server the phone is alerting.
    #expect(await eventually { bob.server.saw(.groupRinging, groupId) })
    #expect(await eventually { await bob.session.calls.first?.inviteReceived == true })
    #expect(bob.reports() == 1)
    #expect(await bob.session.calls.first?.awaitingResolution == false)

    bob.server.push(.groupEnded(.init(callId: groupId, reason: .joinedElsewhere)))
    #expect(await bob.os.saw(.ended(groupUUID, .answeredElsewhere)))
    #expect(!bob.server.saw(.groupDecline))
    await bob.stop()
  }

  // Rule 5 for a Janus group call: Answer joins (asking for one subscriber connection, the
  // default); the action is fulfilled once the publisher connection is up, audio starts in
  // didActivate, mute reaches the publisher, and the in-app hang-up leaves the call through the
  // OS.
  @Test func answeringAGroupRingJoinsAndIsFulfilledWhenThePublisherConnects() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: nil)
    await bob.online()
    bob.invite()
    #expect(await bob.os.saw(.reportIncoming(groupUUID, handle: "alice", name: "Standup", video: false)))
    #expect(await eventually { bob.server.saw(.groupRinging, groupId) })
    let status = await bob.session.calls.first
    #expect(status?.isGroup == true)

    let answer = bob.os.perform(.answer, groupUUID, name: "answer")
    #expect(await eventually { bob.server.saw(.groupJoin, groupId) })
    // By default a device asks to receive everyone on one subscriber connection (20.9).
    #expect(bob.joins.current == [true])
    #expect(await bob.os.saw(.prepareAudio(video: false)))
    bob.server.push(.groupMedia(.init(callId: groupId, sfu: .janus)))
    #expect(await eventually { bob.server.saw(.groupOffer, groupId) })
    #expect(!bob.os.log.contains(.fulfilled(answer)))
    let publisher = try #require(bob.factory.connections.first)
    publisher.emitState(.connected)
    #expect(await bob.os.saw(.fulfilled(answer)))
    #expect(await eventually { await bob.session.calls.first?.stage == .connected })
    #expect(!bob.os.log.contains(.audioOn))
    bob.session.didActivateAudioSession()
    #expect(await bob.os.saw(.audioOn))
    #expect(await bob.liveKit.saw("audioOn"))

    bob.session.setMuted(groupId, true)
    #expect(await eventually { publisher.calls.contains("audio(false)") })

    // The app saw the call's own events too.
    #expect(
      await eventually {
        bob.events.current.contains {
          if case .publisherState(.connected) = $0.event { return $0.callId == groupId }
          return false
        }
      })

    bob.session.hangUp(groupId)
    #expect(await eventually { bob.server.saw(.groupLeave, groupId) })
    #expect(await eventually { bob.os.id("end").map { bob.os.log.contains(.fulfilled($0)) } == true })
    #expect(!bob.os.entries.contains { if case .ended = $0 { true } else { false } })
    #expect(!bob.server.saw(.groupDecline))
    await bob.stop()
  }

  // End in the OS UI declines a ring: one known only from its push (no invite yet, declined
  // over signaling directly), and one that came as a group-invite.
  @Test func endingAGroupRingDeclinesIt() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: groupState(.ringing, bob: .invited))
    #expect(bob.session.receiveVoIPPush(groupPushPayload()))
    #expect(await eventually { bob.server.saw(.getGroup, groupId) })
    let end = bob.os.perform(.end, groupUUID, name: "end")
    #expect(await eventually { bob.server.saw(.groupDecline, groupId) })
    #expect(await bob.os.saw(.fulfilled(end)))

    let other = "g-invited"
    bob.invite(other)
    let uuid = CallUUIDs.uuid(for: other)
    #expect(await bob.os.saw(.reportIncoming(uuid, handle: "alice", name: "Standup", video: false)))
    #expect(await eventually { bob.server.saw(.groupRinging, other) })
    bob.os.perform(.end, uuid, name: "end-other")
    #expect(await eventually { bob.server.saw(.groupDecline, other) })
    #expect(!bob.server.saw(.groupLeave))
    await bob.stop()
  }

  // A LiveKit group call answered from its push before the invite came: the join goes out at
  // once, the app's LiveKit media connect with the server's credentials, their "connected"
  // fulfils the answer, audio and mute follow the OS, and the call's end disconnects them.
  @Test func aPushedLiveKitGroupCallAnsweredBeforeItsInviteFollowsTheOS() async throws {
    let bob = GroupPhone()
    bob.answerRequests(getGroup: groupState(.ringing, bob: .invited))
    #expect(bob.session.receiveVoIPPush(groupPushPayload()))
    #expect(await eventually { await bob.session.calls.first?.shown == true })
    let answer = bob.os.perform(.answer, groupUUID, name: "answer")
    #expect(await eventually { bob.server.saw(.groupJoin, groupId) })

    bob.server.push(.groupMedia(.init(callId: groupId, sfu: .livekit, url: "wss://lk.example", token: "tok")))
    #expect(await bob.liveKit.saw("connect(wss://lk.example, tok, muted: false)"))
    #expect(!bob.os.log.contains(.fulfilled(answer)))
    bob.session.groupMediaStateChanged(groupId, .connected)
    #expect(await bob.os.saw(.fulfilled(answer)))

    bob.session.didActivateAudioSession()
    #expect(await bob.liveKit.saw("audioOn"))
    bob.session.setMuted(groupId, true)
    #expect(await bob.liveKit.saw("muted(true)"))

    bob.server.push(.groupEnded(.init(callId: groupId, reason: .ended)))
    #expect(await bob.os.saw(.ended(groupUUID, .remoteEnded)))
    #expect(await bob.liveKit.saw("disconnect"))
    #expect(bob.reports() == 1)
    await bob.stop()
  }

  // A group call Bob starts goes through the OS: start-call transaction, then group-create;
  // "started connecting" once joined, connected once the publisher is up; the in-app hang-up
  // cancels it (group-end) while nobody else has joined.
  @Test func aStartedGroupCallIsPlacedThroughTheOSAndCancelledOnHangUp() async throws {
    let bob = GroupPhone()
    let callId = try await bob.session.startGroupCall(members: ["alice", "carol"], title: "Standup")
    let uuid = CallUUIDs.uuid(for: callId)
    #expect(
      await bob.os.saw(.request(.startCall(uuid: uuid, handle: "alice, carol", displayName: "Standup", video: false))))
    #expect(await eventually { bob.server.saw(.groupCreate, callId) })
    #expect(await bob.os.saw(.outgoingConnecting(uuid)))
    bob.server.push(.groupMedia(.init(callId: callId, sfu: .janus)))
    #expect(await eventually { bob.server.saw(.groupOffer, callId) })
    let publisher = try #require(bob.factory.connections.first)
    publisher.emitState(.connected)
    #expect(await bob.os.saw(.outgoingConnected(uuid)))
    #expect(!bob.os.log.contains(.audioOn))

    // People are added and removed mid-call through the session too (no OS action).
    bob.session.invite(["dave"], to: callId)
    #expect(await eventually { bob.server.saw(.groupInvite, callId) })
    bob.session.remove("carol", from: callId)
    #expect(await eventually { bob.server.saw(.groupRemove, callId) })

    bob.session.hangUp(callId)
    #expect(await eventually { bob.server.saw(.groupEnd, callId) })
    #expect(!bob.server.saw(.groupLeave))
    #expect(await eventually { await bob.session.calls.isEmpty })
    await bob.stop()
  }

  // A room: joined with the proposed id, whose UUID the OS keeps when the server answers with
  // its live call's id; LiveKit's room connecting reports connected; hang-up leaves the live call.
  @Test func aJoinedRoomKeepsTheProposedUUIDAndLeavesTheLiveCall() async throws {
    let bob = GroupPhone()
    let live = "room-live-call"
    bob.server.onRequest { message, id in
      guard case .roomJoin(let m) = message else { return nil }
      let state = GroupCallState(
        callId: live, creatorId: "alice", room: m.room, video: false, state: .active, createdAt: 1_732_880_000_000,
        members: [
          GroupMember(userId: "alice", state: .joined, deviceId: "phone"),
          GroupMember(userId: "bob", state: .joined, deviceId: "bob-phone"),
        ])
      return .ack(.init(replyTo: id, callId: live, group: state))
    }
    let proposed = try await bob.session.joinRoom("standup")
    let uuid = CallUUIDs.uuid(for: proposed)
    #expect(
      await bob.os.saw(.request(.startCall(uuid: uuid, handle: "standup", displayName: "standup", video: false))))
    #expect(await eventually { bob.server.saw(.roomJoin) })
    #expect(await bob.os.saw(.outgoingConnecting(uuid)))
    #expect(await eventually { await bob.session.calls.first?.callId == live })

    bob.server.push(.groupMedia(.init(callId: live, sfu: .livekit, url: "wss://lk.example", token: "tok")))
    #expect(await bob.liveKit.saw("connect(wss://lk.example, tok, muted: false)"))
    bob.session.groupMediaStateChanged(live, .connected)
    #expect(await bob.os.saw(.outgoingConnected(uuid)))

    bob.session.hangUp(proposed)
    #expect(await eventually { bob.server.saw(.groupLeave, live) })
    #expect(await bob.liveKit.saw("disconnect"))
    #expect(!bob.server.saw(.groupEnd))
    await bob.stop()
  }
}
