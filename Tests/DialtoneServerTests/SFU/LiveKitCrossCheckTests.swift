import DialtoneJSON
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

/// Runs Tests/python/livekit_crosscheck.py, which checks our tokens and webhook verification
/// against LiveKit's own Python SDK. A missing python3 or livekit-api is a failure with
/// instructions, never a skip.
enum LiveKitCrossCheck {
  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  typealias Output = PythonScript.Output

  // PyJWT warns about HMAC keys under 32 bytes on stderr; the fixtures' keys are longer, but
  // a warning must never be mistaken for the reason a check failed.
  static let script = PythonScript("livekit_crosscheck.py", environment: ["PYTHONWARNINGS": "ignore"])

  static func run(_ arguments: [String]) throws -> Output { try script.run(arguments) }

  /// Runs a command that must succeed and returns its output as JSON.
  static func json(_ arguments: [String]) throws -> JSONValue {
    let stdout = try script.succeed(arguments)
    guard let json = JSONValue(parsing: Array(stdout.utf8)) else {
      throw Failure(description: "livekit_crosscheck.py printed no JSON: \(stdout)")
    }
    return json
  }

  static func keyArguments(_ credentials: LiveKitCredentials) -> [String] {
    ["--key", credentials.apiKey, "--secret", credentials.apiSecret]
  }

  /// A webhook built, serialized and signed by LiveKit's SDK: (body bytes, token).
  static func signedWebhook(
    _ event: JSONValue, credentials: LiveKitCredentials = LiveKitFixture.credentials, ttl: Int? = nil
  ) throws -> (body: [UInt8], token: String) {
    try pair(try json(signArguments(event, credentials: credentials, ttl: ttl, compact: false)))
  }

  /// Several events signed in one run of the script, in order.
  static func signedWebhooks(_ events: [JSONValue], compact: Bool) throws -> [(body: [UInt8], token: String)] {
    let signed = try json(
      signArguments(.array(events), credentials: LiveKitFixture.credentials, ttl: nil, compact: compact))
    guard let list = signed.arrayValue, list.count == events.count else {
      throw Failure(description: "sign-webhook printed \(signed.serializedString)")
    }
    return try list.map(pair)
  }

  private static func signArguments(_ event: JSONValue, credentials: LiveKitCredentials, ttl: Int?, compact: Bool)
    -> [String]
  {
    var arguments = ["sign-webhook"] + keyArguments(credentials) + ["--event", event.serializedString]
    if let ttl { arguments += ["--ttl", String(ttl)] }
    if compact { arguments.append("--compact") }
    return arguments
  }

  private static func pair(_ signed: JSONValue) throws -> (body: [UInt8], token: String) {
    guard let body = signed["body"]?.stringValue, let token = signed["token"]?.stringValue else {
      throw Failure(description: "sign-webhook printed \(signed.serializedString)")
    }
    return (Array(body.utf8), token)
  }
}

@Suite struct LiveKitCrossCheckTests {
  let credentials = LiveKitFixture.credentials

  @Test func pythonAndLiveKitAPIAreInstalled() throws {
    let output = try LiveKitCrossCheck.run(["check"])
    #expect(output.status == 0, "\(output.stderr)")
    #expect(output.stdout.hasPrefix("livekit-api "), "\(output.stdout)")
  }

  // MARK: - Our tokens, read by LiveKit's TokenVerifier

  @Test func tokenVerifierReadsBackOurParticipantToken() throws {
    let now = Date()
    let token = try LiveKitAccessToken.participant(
      identity: "alice#phone", name: "Alice", metadata: #"{"user":"alice"}"#, room: "call-42", canPublish: true,
      canSubscribe: true, canPublishData: false, ttl: .seconds(600)
    ).signed(with: credentials, now: now)
    let read = try LiveKitCrossCheck.json(
      ["verify-token"] + LiveKitCrossCheck.keyArguments(credentials) + ["--token", token])
    #expect(read["identity"] == "alice#phone")
    #expect(read["name"] == "Alice")
    #expect(read["metadata"] == #"{"user":"alice"}"#)
    #expect(read["iss"] == "APIdialtoneTest")
    let nbf = Int64(now.timeIntervalSince1970.rounded(.down))
    #expect(read["nbf"] == .int(nbf))
    #expect(read["exp"] == .int(nbf + 600))
    #expect(read["claimNames"] == ["exp", "iss", "metadata", "name", "nbf", "sub", "video"])
    #expect(read["videoNames"] == ["canPublish", "canPublishData", "canSubscribe", "room", "roomJoin"])
    #expect(
      read["video"]
        == [
          "room": "call-42", "room_join": true, "can_publish": true, "can_subscribe": true, "can_publish_data": false,
        ])
  }

  @Test func tokenVerifierReadsBackOurServerTokens() throws {
    let cases: [(LiveKitVideoGrant, [String], [String: JSONValue])] = [
      (LiveKitVideoGrant(roomCreate: true), ["roomCreate"], ["room_create": true, "room": ""]),
      (LiveKitVideoGrant(roomList: true), ["roomList"], ["room_list": true, "room": ""]),
      (
        LiveKitVideoGrant(room: "call-42", roomAdmin: true), ["room", "roomAdmin"],
        ["room_admin": true, "room": "call-42"]
      ),
    ]
    for (grant, names, expected) in cases {
      let token = try LiveKitAccessToken.server(grant).signed(with: credentials, now: Date())
      let read = try LiveKitCrossCheck.json(
        ["verify-token"] + LiveKitCrossCheck.keyArguments(credentials) + ["--token", token])
      #expect(read["identity"] == "")
      #expect(read["videoNames"] == .array(names.map { .string($0) }))
      #expect(read["claimNames"] == ["exp", "iss", "nbf", "video"])
      let video = try #require(read["video"]?.objectValue)
      for (name, value) in expected { #expect(video[name] == value, "\(name) in \(video)") }
      let exp = try #require(read["exp"]?.integerValue)
      let nbf = try #require(read["nbf"]?.integerValue)
      #expect(exp - nbf == 600)
    }
  }

  /// Guards against a vacuous checker: TokenVerifier must refuse what it should.
  @Test func tokenVerifierRefusesOurTokenUnderAnotherSecretOrExpired() throws {
    let token = try LiveKitAccessToken.participant(identity: "bob", room: "r").signed(with: credentials, now: Date())
    let wrong = try LiveKitCrossCheck.run(
      ["verify-token"] + LiveKitCrossCheck.keyArguments(LiveKitFixture.otherCredentials) + ["--token", token])
    #expect(wrong.status == 1, "\(wrong.stderr)")
    let old = try LiveKitAccessToken.participant(identity: "bob", room: "r", ttl: .seconds(600))
      .signed(with: credentials, now: Date() - 3600)
    let expired = try LiveKitCrossCheck.run(
      ["verify-token"] + LiveKitCrossCheck.keyArguments(credentials) + ["--token", old])
    #expect(expired.status == 1, "\(expired.stderr)")
    #expect(expired.stderr.contains("Expired"), "\(expired.stderr)")
  }

  // MARK: - LiveKit's webhooks, read by our verifier

  static let events: [(JSONValue, LiveKitWebhookEvent)] = [
    (
      [
        "event": "room_started", "id": "EV_room1", "created_at": "1750000000",
        "room": [
          "sid": "RM_abc", "name": "call-42", "empty_timeout": 300, "creation_time": "1749999999",
          "enabled_codecs": [["mime": "audio/opus"]],
        ],
      ],
      LiveKitWebhookEvent(
        id: "EV_room1", kind: .roomStarted, roomName: "call-42", roomSid: "RM_abc",
        createdAt: Date(timeIntervalSince1970: 1_750_000_000))
    ),
    (
      [
        "event": "participant_joined", "id": "EV_join1", "created_at": "1750000001",
        "room": ["sid": "RM_abc", "name": "call-42", "num_participants": 2],
        "participant": [
          "sid": "PA_xyz", "identity": "alice#phone", "name": "Alice", "state": "ACTIVE", "joined_at": "1750000001",
          "permission": ["can_publish": true, "can_subscribe": true],
        ],
      ],
      LiveKitWebhookEvent(
        id: "EV_join1", kind: .participantJoined, roomName: "call-42", roomSid: "RM_abc",
        participantIdentity: "alice#phone", participantSid: "PA_xyz",
        createdAt: Date(timeIntervalSince1970: 1_750_000_001))
    ),
    (
      [
        "event": "track_published", "id": "EV_track1", "created_at": "1750000002",
        "room": ["sid": "RM_abc", "name": "call-42"],
        "participant": ["sid": "PA_xyz", "identity": "alice#phone"],
        "track": ["sid": "TR_mic", "type": "AUDIO", "name": "mic", "muted": false],
      ],
      LiveKitWebhookEvent(
        id: "EV_track1", kind: .trackPublished, roomName: "call-42", roomSid: "RM_abc",
        participantIdentity: "alice#phone", participantSid: "PA_xyz", trackSid: "TR_mic",
        createdAt: Date(timeIntervalSince1970: 1_750_000_002))
    ),
    (
      [
        "event": "participant_left", "id": "EV_left1", "created_at": "1750000003",
        "room": ["sid": "RM_abc", "name": "call-42"],
        "participant": ["sid": "PA_xyz", "identity": "alice#phone", "state": "DISCONNECTED"],
      ],
      LiveKitWebhookEvent(
        id: "EV_left1", kind: .participantLeft, roomName: "call-42", roomSid: "RM_abc",
        participantIdentity: "alice#phone", participantSid: "PA_xyz",
        createdAt: Date(timeIntervalSince1970: 1_750_000_003))
    ),
    (
      [
        "event": "room_finished", "id": "EV_end1", "created_at": "1750000004", "num_dropped": 1,
        "room": ["sid": "RM_abc", "name": "call-42"],
      ],
      LiveKitWebhookEvent(
        id: "EV_end1", kind: .roomFinished, roomName: "call-42", roomSid: "RM_abc",
        createdAt: Date(timeIntervalSince1970: 1_750_000_004))
    ),
  ]

  @Test func weAcceptWebhooksSignedByLiveKitsSDK() throws {
    let verifier = LiveKitWebhookVerifier(credentials: credentials)
    for compact in [false, true] {
      let signed = try LiveKitCrossCheck.signedWebhooks(Self.events.map(\.0), compact: compact)
      for ((body, token), expected) in zip(signed, Self.events.map(\.1)) {
        let event = try verifier.verify(
          body: body, authorization: token, contentType: LiveKitWebhookVerifier.contentType, now: Date())
        #expect(event == expected)
      }
    }
  }

  @Test func weRefuseForgedReplayedUnsignedAndExpiredWebhooks() throws {
    let verifier = LiveKitWebhookVerifier(credentials: credentials)
    let type = "application/webhook+json"
    func rejection(_ body: [UInt8], _ token: String?) -> LiveKitWebhookError? {
      do {
        _ = try verifier.verify(body: body, authorization: token, contentType: type, now: Date())
        return nil
      } catch {
        return error
      }
    }
    let (joined, finished) = (Self.events[1].0, Self.events[4].0)
    let genuine = try LiveKitCrossCheck.signedWebhook(joined)

    let forger = LiveKitCredentials(apiKey: credentials.apiKey, apiSecret: "not-the-secret-but-long-enough-0123456789")
    let forged = try LiveKitCrossCheck.signedWebhook(joined, credentials: forger)
    #expect(rejection(forged.body, forged.token) == .badSignature)

    let stranger = try LiveKitCrossCheck.signedWebhook(joined, credentials: LiveKitFixture.otherCredentials)
    #expect(rejection(stranger.body, stranger.token) == .unknownAPIKey(LiveKitFixture.otherCredentials.apiKey))

    // A genuine token lifted onto another event's body.
    let other = try LiveKitCrossCheck.signedWebhook(finished)
    #expect(rejection(other.body, genuine.token) == .bodyHashMismatch)

    #expect(rejection(genuine.body, nil) == .unsigned)

    let expired = try LiveKitCrossCheck.signedWebhook(joined, ttl: -600)
    #expect(rejection(expired.body, expired.token) == .expired)

    #expect(rejection(genuine.body, genuine.token) == nil)
  }

  @Test func theReceiverRefusesAReplayedLiveKitWebhook() throws {
    let receiver = LiveKitWebhookReceiver(
      verifier: LiveKitWebhookVerifier(credentials: credentials), clock: SystemClock())
    let (body, token) = try LiveKitCrossCheck.signedWebhook(Self.events[0].0)
    let type = LiveKitWebhookVerifier.contentType
    #expect(try receiver.receive(body: body, authorization: token, contentType: type).id == "EV_room1")
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_room1")) {
      try receiver.receive(body: body, authorization: token, contentType: type)
    }
  }
}
