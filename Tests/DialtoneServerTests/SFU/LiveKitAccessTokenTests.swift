import DialtoneCrypto
import DialtoneJSON
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

@Suite struct LiveKitAccessTokenTests {
  let credentials = LiveKitFixture.credentials
  let now = LiveKitFixture.now

  @Test func participantTokenCarriesExactlyLiveKitsClaims() throws {
    let token = try LiveKitAccessToken.participant(
      identity: "alice#phone", name: "Alice", metadata: #"{"user":"alice"}"#, room: "call-42", ttl: .seconds(900)
    ).signed(with: credentials, now: now)

    #expect(LiveKitFixture.header(token) == ["alg": "HS256", "typ": "JWT"])
    let expected: [String: JSONValue] = [
      "iss": "APIdialtoneTest", "sub": "alice#phone", "name": "Alice", "metadata": #"{"user":"alice"}"#,
      "nbf": 1_750_000_000, "exp": 1_750_000_900,
      "video": [
        "room": "call-42", "roomJoin": true, "canPublish": true, "canSubscribe": true, "canPublishData": true,
      ],
    ]
    #expect(LiveKitFixture.payload(token) == expected)
    let verified = try JWTVerifier(hs256Secret: credentials.secretBytes).verify(token, now: now, leeway: 0)
    #expect(verified.object == expected)
  }

  @Test func withdrawnPermissionsAreWrittenAsFalse() throws {
    let token = try LiveKitAccessToken.participant(
      identity: "bob", room: "call-42", canPublish: false, canSubscribe: true, canPublishData: false
    ).signed(with: credentials, now: now)
    let video = try #require(LiveKitFixture.payload(token)?["video"])
    #expect(
      video == [
        "room": "call-42", "roomJoin": true, "canPublish": false, "canSubscribe": true, "canPublishData": false,
      ])
  }

  @Test func unsetNameAndMetadataAreLeftOut() throws {
    for name in [nil, ""] as [String?] {
      let token = try LiveKitAccessToken.participant(identity: "bob", name: name, metadata: name, room: "r")
        .signed(with: credentials, now: now)
      let keys = try #require(LiveKitFixture.payload(token)).keys.sorted()
      #expect(keys == ["exp", "iss", "nbf", "sub", "video"])
    }
  }

  @Test func defaultLifetimeIsAnHour() throws {
    let token = try LiveKitAccessToken.participant(identity: "bob", room: "r").signed(with: credentials, now: now)
    let payload = try #require(LiveKitFixture.payload(token))
    #expect(payload["nbf"] == 1_750_000_000)
    #expect(payload["exp"] == 1_750_003_600)
  }

  @Test func expiresAfterItsLifetime() throws {
    let token = try LiveKitAccessToken.participant(identity: "bob", room: "r", ttl: .seconds(60))
      .signed(with: credentials, now: now)
    let verifier = JWTVerifier(hs256Secret: credentials.secretBytes)
    _ = try verifier.verify(token, now: now.addingTimeInterval(59), leeway: 0)
    #expect(throws: JWTError.expired) { try verifier.verify(token, now: now.addingTimeInterval(60), leeway: 0) }
    #expect(throws: JWTError.notYetValid) { try verifier.verify(token, now: now.addingTimeInterval(-1), leeway: 0) }
  }

  @Test func timesComeFromTheInjectedClock() throws {
    let clock = ManualClock(start: now)
    clock.advance(by: .seconds(125))
    let token = try LiveKitAccessToken.participant(identity: "bob", room: "r", ttl: .seconds(10))
      .signed(with: credentials, clock: clock)
    let payload = try #require(LiveKitFixture.payload(token))
    #expect(payload["nbf"] == 1_750_000_125)
    #expect(payload["exp"] == 1_750_000_135)
  }

  /// A fractional `now` is written as whole seconds (floored), as LiveKit's SDKs write them.
  @Test func fractionalNowIsWrittenAsWholeSeconds() throws {
    let token = try LiveKitAccessToken.participant(identity: "bob", room: "r", ttl: .seconds(30))
      .signed(with: credentials, now: now.addingTimeInterval(0.75))
    let payload = try #require(LiveKitFixture.payload(token))
    #expect(payload["nbf"] == 1_750_000_000)
    #expect(payload["exp"] == 1_750_000_030)
  }

  @Test func serverTokensCarryOnlyTheirGrantAndLiveTenMinutes() throws {
    let cases: [(LiveKitVideoGrant, JSONValue)] = [
      (LiveKitVideoGrant(roomCreate: true), ["roomCreate": true]),
      (LiveKitVideoGrant(roomList: true), ["roomList": true]),
      (LiveKitVideoGrant(room: "call-42", roomAdmin: true), ["room": "call-42", "roomAdmin": true]),
    ]
    for (grant, video) in cases {
      let token = try LiveKitAccessToken.server(grant).signed(with: credentials, now: now)
      let expected: [String: JSONValue] = [
        "iss": "APIdialtoneTest", "nbf": 1_750_000_000, "exp": 1_750_000_600, "video": video,
      ]
      #expect(LiveKitFixture.payload(token) == expected)
    }
  }

  @Test func refusesTokensLiveKitWouldRefuse() {
    let missingSecret = LiveKitCredentials(apiKey: "APIx", apiSecret: "")
    let missingKey = LiveKitCredentials(apiKey: "", apiSecret: "secret")
    let participant = LiveKitAccessToken.participant(identity: "bob", room: "r")
    #expect(throws: LiveKitAccessTokenError.missingCredentials) {
      try participant.signed(with: missingSecret, now: now)
    }
    #expect(throws: LiveKitAccessTokenError.missingCredentials) { try participant.signed(with: missingKey, now: now) }
    for ttl: Duration in [.zero, .seconds(-5)] {
      #expect(throws: LiveKitAccessTokenError.nonPositiveTTL) {
        try LiveKitAccessToken.participant(identity: "bob", room: "r", ttl: ttl).signed(with: credentials, now: now)
      }
    }
    #expect(throws: LiveKitAccessTokenError.joinWithoutIdentityOrRoom) {
      try LiveKitAccessToken.participant(identity: "", room: "r").signed(with: credentials, now: now)
    }
    #expect(throws: LiveKitAccessTokenError.joinWithoutIdentityOrRoom) {
      try LiveKitAccessToken.participant(identity: "bob", room: "").signed(with: credentials, now: now)
    }
  }

  @Test func grantReadsBackWhatItWrites() throws {
    let grant = LiveKitVideoGrant(
      room: "r", roomJoin: true, canPublish: false, canSubscribe: true, canPublishData: nil, roomCreate: nil,
      roomList: true, roomAdmin: false)
    #expect(LiveKitVideoGrant(json: grant.json) == grant)
    #expect(
      LiveKitVideoGrant(json: ["roomJoin": true, "hidden": true, "canPublishSources": ["camera"]])
        == .init(roomJoin: true))
    #expect(LiveKitVideoGrant(json: ["roomJoin": "yes"]) == nil)
    #expect(LiveKitVideoGrant(json: ["room": 7]) == nil)
    #expect(LiveKitVideoGrant(json: "room") == nil)
  }
}
