import DialtoneCrypto
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Group calls through a real server and real sockets, on the LiveKit backend (no media server
/// is needed for it: the server only mints tokens and takes webhooks).
@Suite(.serialized)
struct GroupCallServerTests {
  /// RoomService calls land on a fake Twirp server on loopback.
  let twirp: FakeTwirpServer
  var liveKitURL: String { "ws://127.0.0.1:\(twirp.port)" }

  init() throws { twirp = try FakeTwirpServer() }

  private func liveKitServer() async throws -> TestServer {
    let url = liveKitURL
    return try await TestServer { c in
      c.liveKitURL = url
      c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
      c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
      c.groupRingLimit = 3
    }
  }

  private func media(_ message: ServerMessage) -> ServerMessage.GroupMedia? {
    if case .groupMedia(let m) = message { return m }
    return nil
  }

  private func webhook(_ server: TestServer, _ body: [UInt8], authorization: String?) async throws -> Int {
    var request = URLRequest(url: URL(string: server.baseURL + "/v1/livekit/webhook")!)
    request.httpMethod = "POST"
    request.setValue("application/webhook+json", forHTTPHeaderField: "Content-Type")
    if let authorization { request.setValue(authorization, forHTTPHeaderField: "Authorization") }
    request.httpBody = Data(body)
    let (_, response) = try await URLSession.shared.data(for: request)
    return (response as? HTTPURLResponse)?.statusCode ?? 0
  }

  private func event(_ kind: String, room: CallID, identity: String, id: String) -> [UInt8] {
    Array(
      """
      {"event":"\(kind)","id":"\(id)","createdAt":"1750000000",
       "room":{"sid":"RM_1","name":"\(room)"},"participant":{"sid":"PA_1","identity":"\(identity)"}}
      """.utf8)
  }

  @Test func aLiveKitGroupCallHandsEachJoinedDeviceATokenForTheCallsRoom() async throws {
    let server = try await liveKitServer()
    try await server.stopping {
      let alice = try await server.connect("alice", name: "Alice")
      let bob = try await server.connect("bob")

      let created = try await alice.request(.groupCreate(.init(callId: "g-lk-1", members: ["bob"], title: "Plans")))
      #expect(created.isAck)
      guard let aliceMedia = media(try await alice.expect(.groupMedia)) else { return }
      #expect(aliceMedia.sfu == .livekit && aliceMedia.url == liveKitURL)
      let claims = try JWTVerifier(hs256Secret: Array(LiveKitFixture.credentials.apiSecret.utf8)).verify(
        aliceMedia.token ?? "", now: server.clock.now)
      #expect(claims.issuer == LiveKitFixture.credentials.apiKey)
      #expect(claims.subject == "alice/phone")
      #expect(claims.string("name") == "Alice")
      #expect(claims["video"]?["room"]?.stringValue == "g-lk-1")
      #expect(claims["video"]?["roomJoin"]?.boolValue == true)

      guard case .groupInvite(let invite) = try await bob.expect(.groupInvite) else { return }
      #expect(invite.title == "Plans" && invite.memberCount == 2 && invite.from.userId == "alice")
      #expect(try await bob.request(.groupJoin(.init(callId: "g-lk-1"))).isAck)
      // Bob's join is announced to every member (Alice here), and Bob gets his own token.
      guard case .groupUpdate(let update) = try await alice.expect(.groupUpdate) else { return }
      #expect(update.group.member("bob")?.state == .joined)
      var bobToken: String?
      while bobToken == nil {
        let message = try await bob.next().message
        if let m = media(message) { bobToken = m.token }
      }
      _ = try await bob.expect(.groupUpdate)
      #expect(LiveKitFixture.payload(bobToken ?? "")?["sub"]?.stringValue == "bob/phone")

      // Bob leaves: LiveKit is told to remove him (a roomAdmin grant for this room only).
      #expect(try await bob.request(.groupLeave(.init(callId: "g-lk-1"))).isAck)
      #expect(await eventually { twirp.received.contains { $0.path.hasSuffix("/RemoveParticipant") } })
      let removal = twirp.received.first { $0.path.hasSuffix("/RemoveParticipant") }
      #expect(removal?.json?["room"]?.stringValue == "g-lk-1" && removal?.json?["identity"]?.stringValue == "bob/phone")
      let removalGrant = LiveKitFixture.payload(String(removal?.authorization?.dropFirst("Bearer ".count) ?? ""))?[
        "video"]
      #expect(removalGrant?["roomAdmin"]?.boolValue == true && removalGrant?["room"]?.stringValue == "g-lk-1")
      // Alice, the last one in, leaves: the call is over and LiveKit deletes the room.
      _ = try await alice.expect(.groupUpdate)
      #expect(try await alice.request(.groupLeave(.init(callId: "g-lk-1"))).isAck)
      #expect(await eventually { twirp.received.contains { $0.path.hasSuffix("/DeleteRoom") } })
      let deletion = twirp.received.first { $0.path.hasSuffix("/DeleteRoom") }
      #expect(deletion?.json?["room"]?.stringValue == "g-lk-1")
      let deletionGrant = LiveKitFixture.payload(String(deletion?.authorization?.dropFirst("Bearer ".count) ?? ""))?[
        "video"]
      #expect(deletionGrant?["roomCreate"]?.boolValue == true)

      // History keeps the call with each member's part, for members only.
      let token = server.token("alice")
      #expect(
        await eventually {
          (try? await server.http("GET", "/v1/group-calls", token: token).json?["calls"]?.arrayValue?.count) == 1
        })
      let history = try await server.http("GET", "/v1/group-calls", token: token).json
      let record = history?["calls"]?.arrayValue?.first
      #expect(record?["callId"]?.stringValue == "g-lk-1" && record?["title"]?.stringValue == "Plans")
      #expect(record?["endReason"]?.stringValue == "completed")
      let outcomes = record?["participants"]?.arrayValue?.compactMap { $0["outcome"]?.stringValue }
      #expect(outcomes == ["left", "left"])
      #expect(record?["participants"]?.arrayValue?.first?["durationMs"]?.intValue != nil)
      let bobs = try await server.http("GET", "/v1/group-calls", token: server.token("bob")).json
      #expect(bobs?["calls"]?.arrayValue?.count == 1)
      let mallorys = try await server.http("GET", "/v1/group-calls", token: server.token("mallory")).json
      #expect(mallorys?["calls"]?.arrayValue?.count == 0)
      await server.stop()
      await twirp.stop()
    }
  }

  /// Group calls do not outlive a restart yet, but their history is complete: a call live when
  /// the server stopped is recorded on start, ended `server-restart`, and its id stays taken.
  @Test func aGroupCallLiveAtARestartIsInTheHistoryAndItsIdStaysTaken() async throws {
    var server = try await liveKitServer()
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    #expect(try await alice.request(.groupCreate(.init(callId: "g-lk-restart", members: ["bob", "carol"]))).isAck)
    _ = try await bob.expect(.groupInvite)
    #expect(try await bob.request(.groupJoin(.init(callId: "g-lk-restart"))).isAck)
    server.clock.advance(by: 20)
    await server.server.stop()
    await server.client.shutdown()

    let url = liveKitURL
    server = try await TestServer(
      configure: { c in
        c.liveKitURL = url
        c.liveKitAPIKey = LiveKitFixture.credentials.apiKey
        c.liveKitAPISecret = LiveKitFixture.credentials.apiSecret
      }, dataDirectory: server.dataDirectory)
    let history = try await server.http("GET", "/v1/group-calls", token: server.token("bob")).json
    let record = history?["calls"]?.arrayValue?.first
    #expect(record?["callId"]?.stringValue == "g-lk-restart")
    #expect(record?["endReason"]?.stringValue == "server-restart")
    let outcomes = record?["participants"]?.arrayValue?.compactMap { $0["outcome"]?.stringValue }
    #expect(outcomes == ["left", "left", "missed"])  // alice and bob were in it, carol still rang
    let alice2 = try await server.connect("alice")
    guard
      case .error(let refused) = try await alice2.request(.groupCreate(.init(callId: "g-lk-restart", members: ["bob"])))
    else {
      Issue.record("the id of a recorded group call was accepted again")
      return
    }
    #expect(refused.code == .conflict)
    await server.stop()
    await twirp.stop()
  }

  @Test func liveKitWebhooksKeepMembershipTrueAndForgedOnesAreRefused() async throws {
    let server = try await liveKitServer()
    try await server.stopping {
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      _ = try await alice.request(.groupCreate(.init(callId: "g-lk-2", members: ["bob"])))
      _ = try await alice.expect(.groupMedia)
      _ = try await bob.expect(.groupInvite)
      _ = try await bob.request(.groupJoin(.init(callId: "g-lk-2")))
      _ = try await alice.expect(.groupUpdate)

      // Forged (another key's secret), unsigned, and a valid token over another body: refused.
      let left = event("participant_left", room: "g-lk-2", identity: "bob/phone", id: "EV_left")
      let forged = try LiveKitFixture.webhookToken(
        for: left, credentials: LiveKitFixture.otherCredentials, now: server.clock.now)
      #expect(try await webhook(server, left, authorization: forged) == 401)
      #expect(try await webhook(server, left, authorization: nil) == 401)
      let other = event("room_finished", room: "g-lk-2", identity: "bob/phone", id: "EV_other")
      let signedOther = try LiveKitFixture.webhookToken(for: other, now: server.clock.now)
      #expect(try await webhook(server, left, authorization: signedOther) == 401)
      // Nothing changed: Alice hears of Bob's leaving only from the genuine webhook.
      let genuine = try LiveKitFixture.webhookToken(for: left, now: server.clock.now)
      #expect(try await webhook(server, left, authorization: genuine) == 200)
      guard case .groupUpdate(let update) = try await alice.expect(.groupUpdate) else { return }
      #expect(update.group.member("bob")?.state == .left)
      // The same event again is a replay.
      #expect(try await webhook(server, left, authorization: genuine) == 401)

      // LiveKit closing the room ends the call for whoever is still in it.
      let finished = event("room_finished", room: "g-lk-2", identity: "", id: "EV_finished")
      #expect(
        try await webhook(
          server, finished, authorization: try LiveKitFixture.webhookToken(for: finished, now: server.clock.now)) == 200
      )
      guard case .groupEnded(let ended) = try await alice.expect(.groupEnded) else { return }
      #expect(ended.reason == .completed)
      await server.stop()
      await twirp.stop()
    }
  }

  /// A device dropped past the grace is taken out of LiveKit's room, and since its token stays
  /// valid there, coming back into the room (`participant_joined`) takes it out again; a device
  /// that is in the call is left alone.
  @Test func aDeviceGonePastTheGraceIsRemovedFromTheMediaRoomAndKeptOut() async throws {
    let server = try await liveKitServer()
    try await server.stopping {
      let alice = try await server.connect("alice", name: "Alice")
      let bob = try await server.connect("bob", name: "Bob")
      _ = try await alice.request(.groupCreate(.init(callId: "g-lk-grace", members: ["bob"])))
      _ = try await alice.expect(.groupMedia)
      _ = try await bob.expect(.groupInvite)
      #expect(try await bob.request(.groupJoin(.init(callId: "g-lk-grace"))).isAck)
      _ = try await alice.expect(.groupUpdate)
      let removals = { twirp.received.filter { $0.path.hasSuffix("/RemoveParticipant") }.count }

      bob.close()
      _ = try await bob.closeCode()
      try await server.waitUntilOffline("bob", "phone")
      try #require(await eventually { server.clock.hasTimer(dueIn: 30) })  // the grace
      server.clock.advance(by: 31)
      guard case .groupUpdate(let update) = try await alice.expect(.groupUpdate) else { return }
      #expect(update.group.member("bob")?.state == .left)
      #expect(await eventually { removals() == 1 })
      let removal = twirp.received.last { $0.path.hasSuffix("/RemoveParticipant") }
      #expect(removal?.json?["identity"]?.stringValue == "bob/phone")

      // Bob's device rejoins LiveKit's room on its old token: removed again.
      let back = event("participant_joined", room: "g-lk-grace", identity: "bob/phone", id: "EV_back")
      #expect(
        try await webhook(
          server, back, authorization: try LiveKitFixture.webhookToken(for: back, now: server.clock.now))
          == 200)
      #expect(await eventually { removals() == 2 })
      // Alice, who is in the call, joining LiveKit's room is what should happen.
      let aliceIn = event("participant_joined", room: "g-lk-grace", identity: "alice/phone", id: "EV_alice")
      #expect(
        try await webhook(
          server, aliceIn, authorization: try LiveKitFixture.webhookToken(for: aliceIn, now: server.clock.now)) == 200)
      #expect(try await alice.request(.getGroup(.init(callId: "g-lk-grace"))).isAck)
      #expect(removals() == 2)
      await server.stop()
      await twirp.stop()
    }
  }

  /// 18.2: a room is entered by its name; its call id lets nobody else in.
  @Test func aRoomsCallIdIsNoWayInForSomeoneWhoNeverEnteredIt() async throws {
    let server = try await liveKitServer()
    try await server.stopping {
      let alice = try await server.connect("alice")
      let mallory = try await server.connect("mallory")
      guard case .ack(let opened) = try await alice.request(.roomJoin(.init(room: "book-club", callId: "r-lk-1"))),
        let callId = opened.group?.callId
      else { return }
      _ = try await alice.expect(.groupMedia)
      for message: ClientMessage in [
        .groupJoin(.init(callId: callId)), .groupOffer(.init(callId: callId, stream: "publisher", sdp: "v=0\r\n")),
        .groupAnswer(.init(callId: callId, stream: "feed-1", sdp: "v=0\r\n")),
        .groupCandidate(.init(callId: callId, stream: "publisher", candidate: IceCandidate(candidate: "candidate:1"))),
        .groupLeave(.init(callId: callId)), .getGroup(.init(callId: callId)),
      ] {
        #expect(try await mallory.request(message).errorCode == .notFound, "\(message.type)")
      }
      guard case .ack(let ack) = try await alice.request(.getGroup(.init(callId: callId))) else { return }
      #expect(ack.group?.members.map(\.userId) == ["alice"])
      #expect(!twirp.received.contains { $0.json?["identity"]?.stringValue == "mallory/phone" })
      await server.stop()
      await twirp.stop()
    }
  }

  @Test func badGroupInputGetsClearErrorsAndChangesNothing() async throws {
    let server = try await liveKitServer()
    try await server.stopping {
      let alice = try await server.connect("alice")
      let mallory = try await server.connect("mallory")

      // An oversize member list (the ring limit is 3 here), nobody else, a malformed id.
      let tooMany = try await alice.request(.groupCreate(.init(callId: "g-bad", members: ["a", "b", "c", "d"])))
      #expect(tooMany.errorCode == .tooLarge)
      #expect(
        try await alice.request(.groupCreate(.init(callId: "g-bad", members: ["alice"]))).errorCode == .badRequest)
      alice.sendRaw(#"{"type":"group-create","id":"r1","callId":"g-bad","members":"bob"}"#)
      #expect(try await alice.next().message.errorCode == .badRequest)

      _ = try await alice.request(.groupCreate(.init(callId: "g-ok", members: ["bob"])))
      _ = try await alice.expect(.groupMedia)
      // A non-member: joining, reading, offering, ending — all "no such call", as for unknown ids.
      #expect(try await mallory.request(.groupJoin(.init(callId: "g-ok"))).errorCode == .notFound)
      #expect(try await mallory.request(.getGroup(.init(callId: "g-ok"))).errorCode == .notFound)
      let offer = ClientMessage.groupOffer(.init(callId: "g-ok", stream: "publisher", sdp: "v=0\r\n"))
      #expect(try await mallory.request(offer).errorCode == .notFound)
      #expect(try await mallory.request(.groupEnd(.init(callId: "g-ok"))).errorCode == .notFound)
      #expect(try await mallory.request(.groupJoin(.init(callId: "g-unknown"))).errorCode == .notFound)
      // A 1:1 invite cannot take a group call's id.
      #expect(
        try await mallory.request(.invite(.init(callId: "g-ok", to: "alice", video: false))).errorCode == .conflict)

      // Alice's call is as it was: Bob still invited, nobody else in it.
      guard case .ack(let ack) = try await alice.request(.getGroup(.init(callId: "g-ok"))) else { return }
      #expect(ack.group?.members.map(\.userId) == ["alice", "bob"])
      #expect(ack.group?.member("bob")?.state == .invited)
      await server.stop()
      await twirp.stop()
    }
  }

  @Test func withoutAnSFUGroupCallsAreRefusedClearly() async throws {
    let server = try await TestServer()
    try await server.stopping {
      let alice = try await server.connect("alice")
      let reply = try await alice.request(.groupCreate(.init(callId: "g-none", members: ["bob"])))
      #expect(reply.errorCode == .invalidState)
      if case .error(let e) = reply { #expect(e.message.contains("no SFU")) }
      await server.stop()
      await twirp.stop()
    }
  }
}
