import DialtoneCalls
import DialtoneJSON
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A running group call growing and shrinking through a real server and real sockets, on the
/// LiveKit backend (its RoomService lands on a fake Twirp server): `group-invite` rings like a
/// create, `group-remove` revokes the member's media and keeps them out, the policy flag holds.
@Suite(.serialized)
struct GroupMembershipServerTests {
  let twirp: FakeTwirpServer

  init() throws { twirp = try FakeTwirpServer() }

  private func server(_ configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) async throws
    -> TestServer
  {
    let url = "ws://127.0.0.1:\(twirp.port)"
    return try await TestServer { c in
      c.liveKitURL = url
      c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
      c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
      configure(&c)
    }
  }

  /// Sends a request and returns its answer, passing over the call's other messages meanwhile.
  private func ask(_ probe: SignalingProbe, _ message: ClientMessage) async throws -> ServerMessage {
    let id = probe.newID()
    probe.send(ClientEnvelope(id: id, message: message))
    for _ in 0..<50 {
      let envelope = try await probe.next("answer to \(id)")
      if envelope.message.replyTo == id { return envelope.message }
    }
    throw ProbeFailure(description: "no answer to \(id) in 50 messages")
  }

  /// The next message of `type`, passing over others.
  private func next(_ probe: SignalingProbe, _ type: ServerMessageType) async throws -> ServerMessage {
    for _ in 0..<50 {
      let message = try await probe.next(type.rawValue).message
      if message.knownType == type { return message }
    }
    throw ProbeFailure(description: "no \(type.rawValue) in 50 messages")
  }

  @Test func anInviteRingsAndARemovalRevokesAndKeepsTheMemberOut() async throws {
    let server = try await server()
    try await server.stopping {
      let alice = try await server.connect("alice", name: "Alice")
      let bob = try await server.connect("bob", name: "Bob")
      let carol = try await server.connect("carol")
      #expect(try await ask(alice, .groupCreate(.init(callId: "g-grow", members: ["bob"]))).isAck)
      _ = try await next(bob, .groupInvite)
      #expect(try await ask(bob, .groupJoin(.init(callId: "g-grow"))).isAck)

      // Bob rings Carol into the running call: she is rung from Bob's device.
      guard case .ack(let invited) = try await ask(bob, .groupInvite(.init(callId: "g-grow", members: ["carol"])))
      else {
        Issue.record("invite refused")
        return
      }
      #expect(invited.group?.member("carol")?.state == .invited)
      guard case .groupInvite(let ring) = try await next(carol, .groupInvite) else { return }
      #expect(ring.from.userId == "bob" && ring.memberCount == 3 && ring.group.state == .active)
      #expect(try await ask(carol, .groupJoin(.init(callId: "g-grow"))).isAck)
      _ = try await next(carol, .groupMedia)

      // Only the owner removes.
      #expect(try await ask(bob, .groupRemove(.init(callId: "g-grow", userId: "carol"))).errorCode == .forbidden)
      #expect(try await ask(alice, .groupRemove(.init(callId: "g-grow", userId: "mallory"))).errorCode == .notFound)
      let removals = { twirp.received.filter { $0.path.hasSuffix("/RemoveParticipant") } }
      #expect(removals().isEmpty)
      #expect(try await ask(alice, .groupRemove(.init(callId: "g-grow", userId: "bob"))).isAck)
      guard case .groupEnded(let end) = try await next(bob, .groupEnded) else { return }
      #expect(end.reason == .removed && end.from?.userId == "alice")
      // LiveKit is told to drop Bob's device at once.
      #expect(await eventually { removals().count == 1 })
      #expect(removals().first?.json?["identity"]?.stringValue == "bob/phone")
      // Carol sees him removed.
      var removedSeen = false
      for _ in 0..<10 where !removedSeen {
        if case .groupUpdate(let update) = try await next(carol, .groupUpdate) {
          removedSeen = update.group.member("bob")?.state == .removed
        }
      }
      #expect(removedSeen)
      // He is no member any more: no way back by the call's id.
      #expect(try await ask(bob, .groupJoin(.init(callId: "g-grow"))).errorCode == .notFound)
      #expect(try await ask(bob, .getGroup(.init(callId: "g-grow"))).errorCode == .notFound)
      // His device rejoining LiveKit's room on its old token is removed again (the webhook path).
      let back = Array(
        """
        {"event":"participant_joined","id":"EV_removed","createdAt":"1750000000",
         "room":{"sid":"RM_1","name":"g-grow"},"participant":{"sid":"PA_1","identity":"bob/phone"}}
        """.utf8)
      var request = URLRequest(url: URL(string: server.baseURL + "/v1/livekit/webhook")!)
      request.httpMethod = "POST"
      request.setValue("application/webhook+json", forHTTPHeaderField: "Content-Type")
      request.setValue(
        try LiveKitFixture.webhookToken(for: back, now: server.clock.now), forHTTPHeaderField: "Authorization")
      request.httpBody = Data(back)
      _ = try await URLSession.shared.data(for: request)
      #expect(await eventually { removals().count == 2 })

      // The history says who was removed.
      #expect(try await ask(alice, .groupEnd(.init(callId: "g-grow"))).isAck)
      let token = server.token("alice")
      #expect(
        await eventually {
          (try? await server.http("GET", "/v1/group-calls", token: token).json?["calls"]?.arrayValue?.count) == 1
        })
      let record = try await server.http("GET", "/v1/group-calls", token: token).json?["calls"]?.arrayValue?.first
      let outcomes = Dictionary(
        uniqueKeysWithValues: (record?["participants"]?.arrayValue ?? []).compactMap { p in
          p["userId"]?.stringValue.flatMap { user in p["outcome"]?.stringValue.map { (user, $0) } }
        })
      #expect(outcomes == ["alice": "left", "bob": "removed", "carol": "left"])
      await server.stop()
      await twirp.stop()
    }
  }

  @Test func theOwnerPolicyAndBlocksHoldForInvites() async throws {
    let server = try await server { $0.groupInvitePolicy = .owner }
    try await server.stopping {
      // Dave blocks Alice: her invite rings him not, and says nothing of it.
      #expect(try await server.http("PUT", "/v1/blocks/alice", token: server.token("dave")).status == 204)
      let alice = try await server.connect("alice", name: "Alice")
      let bob = try await server.connect("bob")
      let dave = try await server.connect("dave")
      let erin = try await server.connect("erin")
      #expect(try await ask(alice, .groupCreate(.init(callId: "g-policy", members: ["bob"]))).isAck)
      _ = try await next(bob, .groupInvite)
      #expect(try await ask(bob, .groupJoin(.init(callId: "g-policy"))).isAck)
      #expect(
        try await ask(bob, .groupInvite(.init(callId: "g-policy", members: ["erin"]))).errorCode == .forbidden)
      #expect(try await ask(alice, .groupInvite(.init(callId: "g-policy", members: ["dave", "erin"]))).isAck)
      _ = try await next(erin, .groupInvite)
      try await dave.expectQuiet()
      #expect(try await ask(dave, .getGroup(.init(callId: "g-policy"))).errorCode == .notFound)
      await server.stop()
      await twirp.stop()
    }
  }

  @Test func aRoomsOwnerEndsTheRoom() async throws {
    let server = try await server()
    try await server.stopping {
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      guard case .ack(let opened) = try await ask(alice, .roomJoin(.init(room: "book-club"))),
        let callId = opened.callId
      else {
        Issue.record("no room")
        return
      }
      #expect(try await ask(bob, .roomJoin(.init(room: "book-club"))).isAck)
      #expect(try await ask(bob, .groupEnd(.init(callId: callId))).errorCode == .forbidden)
      #expect(try await ask(alice, .groupEnd(.init(callId: callId))).isAck)
      guard case .groupEnded(let end) = try await next(bob, .groupEnded) else { return }
      #expect(end.reason == .ended)
      // The next join by name starts a new call.
      guard case .ack(let next) = try await ask(bob, .roomJoin(.init(room: "book-club"))) else { return }
      #expect(next.callId != callId && next.group?.creatorId == "bob")
      await server.stop()
      await twirp.stop()
    }
  }
}
