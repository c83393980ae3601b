import DialtoneCrypto
import DialtoneHTTPClient
import DialtoneJSON
import DialtoneNet
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

/// A stand-in for LiveKit's RoomService on 127.0.0.1 that records every request it is sent.
final class FakeTwirpServer: Sendable {
  struct Received: Sendable {
    let method: HTTPMethod
    let path: String
    let authorization: String?
    let contentType: String?
    let body: [UInt8]
    var json: JSONValue? { JSONValue(parsing: body) }
  }

  private struct NoWebSockets: WebSocketHandler {
    func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) { connection.close() }
    func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {}
    func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
  }

  let server: WebServer
  private let log: Locked<[Received]>

  init(prefix: String = "") throws {
    let log = Locked<[Received]>([])
    var router = Router()
    router.add(.POST, "\(prefix)/twirp/livekit.RoomService/{method}") { request in
      log.withLock {
        $0.append(
          Received(
            method: request.method, path: request.path, authorization: request.headers["authorization"],
            contentType: request.headers["content-type"], body: request.body))
      }
      return Self.answer(request.pathParameters["method"] ?? "", JSONValue(parsing: request.body))
    }
    self.log = log
    server = try WebServer(
      configuration: WebServerConfiguration(host: "127.0.0.1", port: 0, drainSeconds: 1), router: router,
      webSocketHandler: NoWebSockets())
  }

  var port: Int { server.port }
  var received: [Received] { log.current }

  func stop() async { await server.stop() }

  /// Rooms named `gone` do not exist; `proxied` is answered by a "proxy" with no Twirp body.
  private static func answer(_ method: String, _ body: JSONValue?) -> HTTPResponse {
    let room = body?["room"]?.stringValue ?? ""
    if room == "gone" {
      return HTTPResponse(status: 404, body: Array(#"{"code":"not_found","msg":"requested room does not exist"}"#.utf8))
    }
    if room == "proxied" { return .text("<html>Bad Gateway</html>", status: 502, contentType: "text/html") }
    switch method {
    case "DeleteRoom", "RemoveParticipant":
      return HTTPResponse(body: Array("{}".utf8))
    case "ListParticipants" where room == "empty":
      return HTTPResponse(body: Array("{}".utf8))
    case "ListParticipants":
      return HTTPResponse(
        body: Array(
          """
          {"participants":[
            {"sid":"PA_1","identity":"alice#phone","name":"Alice","state":"ACTIVE","joined_at":"1750000000",
             "tracks":[{"sid":"TR_1"}]},
            {"sid":"PA_2","identity":"bob#cli","joinedAt":"1750000005","metadata":"m"}
          ]}
          """.utf8))
    default:
      return HTTPResponse(status: 404, body: Array(#"{"code":"bad_route","msg":"no handler"}"#.utf8))
    }
  }
}

@Suite(.serialized) struct LiveKitRoomServiceTests {
  struct Rig {
    let fake: FakeTwirpServer
    let http: HTTPClient
    let clock: ManualClock
    let service: LiveKitRoomService

    /// The service is given `scheme://127.0.0.1:port` + `suffix`.
    static func start(prefix: String = "", scheme: String = "ws", suffix: String = "") throws -> Rig {
      let fake = try FakeTwirpServer(prefix: prefix)
      let http = HTTPClient(configuration: HTTPClient.Configuration(http2: false))
      let clock = ManualClock(start: LiveKitFixture.now)
      let service = try LiveKitRoomService(
        serverURL: "\(scheme)://127.0.0.1:\(fake.port)\(suffix)", credentials: LiveKitFixture.credentials, http: http,
        clock: clock)
      return Rig(fake: fake, http: http, clock: clock, service: service)
    }

    func stop() async {
      http.shutdown()
      await fake.stop()
    }

    /// The one request the fake received, with its token's verified claims.
    func onlyRequest() throws -> (FakeTwirpServer.Received, [String: JSONValue]) {
      let received = fake.received
      try #require(received.count == 1, "requests: \(received.map(\.path))")
      let request = received[0]
      let authorization = try #require(request.authorization)
      try #require(authorization.hasPrefix("Bearer "))
      let token = String(authorization.dropFirst("Bearer ".count))
      let claims = try JWTVerifier(hs256Secret: LiveKitFixture.credentials.secretBytes)
        .verify(token, now: clock.now, leeway: 0)
      return (request, claims.object)
    }
  }

  /// Runs `body` against a fresh fake server and client, and stops both whatever happens.
  private func withRig(
    prefix: String = "", scheme: String = "ws", suffix: String = "",
    _ body: (Rig) async throws -> Void
  ) async throws {
    try await stopping(try Rig.start(prefix: prefix, scheme: scheme, suffix: suffix), stop: { await $0.stop() }, body)
  }

  private func serverClaims(video: JSONValue) -> [String: JSONValue] {
    ["iss": "APIdialtoneTest", "nbf": 1_750_000_000, "exp": 1_750_000_600, "video": video]
  }

  @Test func deleteRoomPostsTheRoomWithARoomCreateToken() async throws {
    try await withRig { rig in
      try await rig.service.deleteRoom("call-42")
      let (request, claims) = try rig.onlyRequest()
      #expect(request.method == .POST)
      #expect(request.path == "/twirp/livekit.RoomService/DeleteRoom")
      #expect(request.contentType == "application/json")
      #expect(request.json == ["room": "call-42"])
      #expect(claims == serverClaims(video: ["roomCreate": true]))
    }
  }

  @Test func removeParticipantPostsRoomAndIdentityWithARoomAdminToken() async throws {
    try await withRig { rig in
      try await rig.service.removeParticipant(room: "call-42", identity: "alice#phone")
      let (request, claims) = try rig.onlyRequest()
      #expect(request.method == .POST)
      #expect(request.path == "/twirp/livekit.RoomService/RemoveParticipant")
      #expect(request.contentType == "application/json")
      #expect(request.json == ["room": "call-42", "identity": "alice#phone"])
      #expect(claims == serverClaims(video: ["room": "call-42", "roomAdmin": true]))
    }
  }

  @Test func listParticipantsReadsBothJSONNameStyles() async throws {
    try await withRig { rig in
      let participants = try await rig.service.listParticipants(room: "call-42")
      #expect(
        participants == [
          LiveKitParticipant(
            sid: "PA_1", identity: "alice#phone", name: "Alice", joinedAt: Date(timeIntervalSince1970: 1_750_000_000)),
          LiveKitParticipant(
            sid: "PA_2", identity: "bob#cli", metadata: "m", joinedAt: Date(timeIntervalSince1970: 1_750_000_005)),
        ])
      let (request, claims) = try rig.onlyRequest()
      #expect(request.path == "/twirp/livekit.RoomService/ListParticipants")
      #expect(request.json == ["room": "call-42"])
      #expect(claims == serverClaims(video: ["room": "call-42", "roomAdmin": true]))
      #expect(try await rig.service.listParticipants(room: "empty") == [])
    }
  }

  @Test func tokensAreMintedPerCallOnTheInjectedClock() async throws {
    try await withRig { rig in
      try await rig.service.deleteRoom("a")
      rig.clock.advance(by: .seconds(900))
      try await rig.service.deleteRoom("b")
      let nbfs = rig.fake.received.compactMap {
        $0.authorization.flatMap { LiveKitFixture.payload(String($0.dropFirst(7))) }?["nbf"]
      }
      #expect(nbfs == [1_750_000_000, 1_750_000_900])
    }
  }

  @Test func twirpErrorsCarryTheirCodeAndMessage() async throws {
    try await withRig { rig in
      do throws(LiveKitRoomServiceError) {
        try await rig.service.deleteRoom("gone")
        Issue.record("deleting a missing room succeeded")
      } catch {
        #expect(error == .twirp(status: 404, code: "not_found", message: "requested room does not exist"))
        #expect(error.isNotFound)
        #expect(error.description.contains("not_found"))
      }
      do throws(LiveKitRoomServiceError) {
        try await rig.service.removeParticipant(room: "proxied", identity: "x")
        Issue.record("a 502 was taken for success")
      } catch {
        #expect(error == .twirp(status: 502, code: nil, message: nil))
        #expect(!error.isNotFound)
      }
    }
  }

  @Test func keepsAPathPrefixOfTheServerURL() async throws {
    try await withRig(prefix: "/livekit", scheme: "http", suffix: "/livekit/") { rig in
      try await rig.service.deleteRoom("call-42")
      let (request, _) = try rig.onlyRequest()
      #expect(request.path == "/livekit/twirp/livekit.RoomService/DeleteRoom")
    }
  }

  @Test func anUnreachableServerIsATransportError() async throws {
    let fake = try FakeTwirpServer()
    let port = fake.port
    await fake.stop()
    let http = HTTPClient(configuration: HTTPClient.Configuration(http2: false))
    defer { http.shutdown() }
    let service = try LiveKitRoomService(
      serverURL: "http://127.0.0.1:\(port)", credentials: LiveKitFixture.credentials, http: http, timeoutSeconds: 5)
    do throws(LiveKitRoomServiceError) {
      try await service.deleteRoom("call-42")
      Issue.record("a request to a closed port succeeded")
    } catch {
      guard case .transport = error else {
        Issue.record("expected a transport error, got \(error)")
        return
      }
    }
  }

  @Test func serverURLsMapToTheirHTTPBase() throws {
    let cases: [(String, String)] = [
      ("wss://lk.example.com", "https://lk.example.com"),
      ("ws://127.0.0.1:7880", "http://127.0.0.1:7880"),
      ("WSS://lk.example.com:443/", "https://lk.example.com:443"),
      ("https://lk.example.com/prefix//", "https://lk.example.com/prefix"),
      ("http://[::1]:7880", "http://[::1]:7880"),
    ]
    for (text, base) in cases { #expect(try LiveKitServerURL(text).httpBase == base) }
    #expect(
      try LiveKitServerURL("wss://lk.example.com").twirp(service: "RoomService", method: "DeleteRoom")
        == "https://lk.example.com/twirp/livekit.RoomService/DeleteRoom")
    for text in [
      "lk.example.com", "ftp://lk.example.com", "wss://", "wss:///path", "https://h?x=1", "https://u@h", "https://h#f",
    ] {
      #expect(throws: LiveKitRoomServiceError.invalidServerURL(text)) { try LiveKitServerURL(text) }
    }
  }

  @Test func refusesToSignWithoutCredentials() async throws {
    let http = HTTPClient(configuration: HTTPClient.Configuration(http2: false))
    defer { http.shutdown() }
    let service = try LiveKitRoomService(
      serverURL: "http://127.0.0.1:9", credentials: LiveKitCredentials(apiKey: "APIx", apiSecret: ""), http: http)
    await #expect(throws: LiveKitRoomServiceError.token(.missingCredentials)) { try await service.deleteRoom("r") }
  }
}
