import DialtoneCrypto
import DialtoneJSON
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

@Suite struct LiveKitWebhookVerifierTests {
  let verifier = LiveKitWebhookVerifier(credentials: LiveKitFixture.credentials)
  let now = LiveKitFixture.now
  let webhookType = "application/webhook+json"

  private func verify(
    _ body: [UInt8], _ authorization: String?, contentType: String? = "application/webhook+json", at time: Date? = nil
  ) throws(LiveKitWebhookError) -> LiveKitWebhookEvent {
    try verifier.verify(body: body, authorization: authorization, contentType: contentType, now: time ?? now)
  }

  private func rejection(
    _ body: [UInt8], _ authorization: String?, contentType: String? = "application/webhook+json", at time: Date? = nil
  ) -> LiveKitWebhookError? {
    do {
      _ = try verify(body, authorization, contentType: contentType, at: time)
      return nil
    } catch {
      return error
    }
  }

  @Test func acceptsASignedEventAndReadsItsFields() throws {
    let body = LiveKitFixture.webhookBody()
    let event = try verify(body, try LiveKitFixture.webhookToken(for: body))
    #expect(
      event
        == LiveKitWebhookEvent(
          id: "EV_fixture1", kind: .participantJoined, roomName: "call-42", roomSid: "RM_abc",
          participantIdentity: "alice#phone", participantSid: "PA_xyz", trackSid: "TR_1",
          createdAt: Date(timeIntervalSince1970: 1_750_000_000)))
  }

  @Test func readsEveryEventKind() throws {
    let kinds: [(String, LiveKitWebhookEvent.Kind)] = [
      ("room_started", .roomStarted), ("room_finished", .roomFinished), ("participant_joined", .participantJoined),
      ("participant_left", .participantLeft), ("track_published", .trackPublished),
      ("track_unpublished", .trackUnpublished), ("egress_ended", .other("egress_ended")),
      ("participant_connection_aborted", .other("participant_connection_aborted")),
    ]
    for (name, kind) in kinds {
      let body = LiveKitFixture.webhookBody(event: name)
      #expect(try verify(body, try LiveKitFixture.webhookToken(for: body)).kind == kind)
      #expect(kind.wireName == name)
    }
  }

  @Test func leavesUnsetFieldsNil() throws {
    let body = Array(
      #"{"event":"room_finished","id":"EV_2","room":{"name":"call-42","sid":""},"createdAt":1750000001}"#.utf8)
    let event = try verify(body, try LiveKitFixture.webhookToken(for: body))
    #expect(
      event
        == LiveKitWebhookEvent(
          id: "EV_2", kind: .roomFinished, roomName: "call-42", createdAt: Date(timeIntervalSince1970: 1_750_000_001)))
    let bare = Array(#"{"event":"room_started","id":"EV_3","participant":null}"#.utf8)
    #expect(
      try verify(bare, try LiveKitFixture.webhookToken(for: bare))
        == LiveKitWebhookEvent(id: "EV_3", kind: .roomStarted))
  }

  @Test func acceptsABearerPrefixAndMediaTypeParameters() throws {
    let body = LiveKitFixture.webhookBody()
    let token = try LiveKitFixture.webhookToken(for: body)
    for authorization in ["Bearer \(token)", "bearer \(token)", " \(token) "] {
      #expect(try verify(body, authorization).id == "EV_fixture1")
    }
    for type in ["application/webhook+json; charset=utf-8", "Application/Webhook+JSON", " application/webhook+json ;"] {
      #expect(try verify(body, token, contentType: type).id == "EV_fixture1")
    }
  }

  @Test func refusesOtherContentTypes() throws {
    let body = LiveKitFixture.webhookBody()
    let token = try LiveKitFixture.webhookToken(for: body)
    for type in [nil, "", "application/json", "text/plain", "application/webhook+jsonx"] as [String?] {
      #expect(rejection(body, token, contentType: type) == .badContentType(type))
    }
  }

  @Test func refusesUnsignedRequests() {
    let body = LiveKitFixture.webhookBody()
    for authorization in [nil, "", "   ", "Bearer ", "Bearer    "] as [String?] {
      #expect(rejection(body, authorization) == .unsigned)
    }
  }

  @Test func refusesMalformedTokens() throws {
    let body = LiveKitFixture.webhookBody()
    #expect(rejection(body, "not-a-token") == .malformedToken("not a compact JWT"))
    #expect(rejection(body, "a.b") == .malformedToken("not a compact JWT"))
    let noIssuer = try JWTSigner.hs256(secret: LiveKitFixture.credentials.secretBytes).sign(
      claims: JWTClaims(
        notBefore: now, expiresAt: now + 300, extra: ["sha256": .string(Base64.encode(SHA256.hash(body)))]))
    #expect(rejection(body, noIssuer) == .malformedToken("no \"iss\" (the API key)"))
    let noExpiry = try JWTSigner.hs256(secret: LiveKitFixture.credentials.secretBytes).sign(
      claims: JWTClaims(
        issuer: LiveKitFixture.credentials.apiKey, notBefore: now,
        extra: ["sha256": .string(Base64.encode(SHA256.hash(body)))]))
    #expect(rejection(body, noExpiry) == .malformedToken("no \"exp\""))
  }

  @Test func refusesAnUnknownAPIKey() throws {
    let body = LiveKitFixture.webhookBody()
    let token = try LiveKitFixture.webhookToken(for: body, credentials: LiveKitFixture.otherCredentials)
    #expect(rejection(body, token) == .unknownAPIKey("APIotherKey"))
  }

  @Test func refusesAForgedSignature() throws {
    let body = LiveKitFixture.webhookBody()
    let forger = LiveKitCredentials(apiKey: LiveKitFixture.credentials.apiKey, apiSecret: "guessed-secret")
    #expect(rejection(body, try LiveKitFixture.webhookToken(for: body, credentials: forger)) == .badSignature)
    // A genuine token whose claims were swapped for the forger's own.
    let genuine = try LiveKitFixture.webhookToken(for: body).split(separator: ".")
    let forgedClaims = try #require(
      LiveKitFixture.payload(try LiveKitFixture.webhookToken(for: Array("other".utf8), credentials: forger)))
    let spliced = [String(genuine[0]), Base64URL.encode(JSONValue.object(forgedClaims).serialized), String(genuine[2])]
    #expect(rejection(Array("other".utf8), spliced.joined(separator: ".")) == .badSignature)
  }

  @Test func refusesOtherAlgorithms() throws {
    let body = LiveKitFixture.webhookBody()
    let genuine = try LiveKitFixture.webhookToken(for: body).split(separator: ".")
    for alg in ["none", "HS512", "RS256"] {
      let header = Base64URL.encode(JSONValue.object(["alg": .string(alg), "typ": "JWT"]).serialized)
      let token = [header, String(genuine[1]), alg == "none" ? "" : String(genuine[2])].joined(separator: ".")
      #expect(rejection(body, token) == .unsupportedAlgorithm(alg))
    }
  }

  @Test func allowsAMinuteOfClockSkewAndNoMore() throws {
    let body = LiveKitFixture.webhookBody()
    let token = try LiveKitFixture.webhookToken(for: body, ttl: 300)
    #expect(try verify(body, token, at: now + 359).id == "EV_fixture1")
    #expect(rejection(body, token, at: now + 360) == .expired)
    #expect(rejection(body, token, at: now + 3600) == .expired)
    #expect(try verify(body, token, at: now - 60).id == "EV_fixture1")
    #expect(rejection(body, token, at: now - 61) == .notYetValid)
  }

  @Test func refusesATokenForAnotherBody() throws {
    let body = LiveKitFixture.webhookBody()
    let other = LiveKitFixture.webhookBody(id: "EV_other")
    #expect(rejection(other, try LiveKitFixture.webhookToken(for: body)) == .bodyHashMismatch)
    // One byte of whitespace is a different body: the hash is over bytes, not over JSON.
    #expect(rejection(body + [0x0A], try LiveKitFixture.webhookToken(for: body)) == .bodyHashMismatch)
    #expect(rejection(body, try LiveKitFixture.webhookToken(for: body, sha256: "not base64!")) == .bodyHashMismatch)
  }

  @Test func refusesATokenWithoutABodyHash() throws {
    let body = LiveKitFixture.webhookBody()
    let claims = JWTClaims(issuer: LiveKitFixture.credentials.apiKey, notBefore: now, expiresAt: now + 300)
    let token = try JWTSigner.hs256(secret: LiveKitFixture.credentials.secretBytes).sign(claims: claims)
    #expect(rejection(body, token) == .missingBodyHash)
    #expect(rejection(body, try LiveKitFixture.webhookToken(for: body, sha256: "")) == .missingBodyHash)
  }

  @Test func acceptsEveryConfiguredKeyAndIgnoresEmptySecrets() throws {
    let other = LiveKitFixture.otherCredentials
    let rotating = LiveKitWebhookVerifier(keys: [
      LiveKitFixture.credentials.apiKey: LiveKitFixture.credentials.apiSecret, other.apiKey: other.apiSecret,
      "APIempty": "",
    ])
    let body = LiveKitFixture.webhookBody()
    for credentials in [LiveKitFixture.credentials, other] {
      let token = try LiveKitFixture.webhookToken(for: body, credentials: credentials)
      #expect(
        try rotating.verify(body: body, authorization: token, contentType: webhookType, now: now).id == "EV_fixture1")
    }
    let empty = LiveKitCredentials(apiKey: "APIempty", apiSecret: "x")
    let token = try LiveKitFixture.webhookToken(for: body, credentials: empty)
    #expect(throws: LiveKitWebhookError.unknownAPIKey("APIempty")) {
      try rotating.verify(body: body, authorization: token, contentType: webhookType, now: now)
    }
  }

  @Test func refusesSignedBodiesThatAreNotEvents() throws {
    let bodies: [(String, String)] = [
      ("{", "not JSON"),
      ("[1]", "not a JSON object"),
      (#"{"id":"EV_1"}"#, "no \"event\""),
      (#"{"event":"","id":"EV_1"}"#, "no \"event\""),
      (#"{"event":"room_started"}"#, "no \"id\""),
      (#"{"event":7,"id":"EV_1"}"#, "not a string"),
      (#"{"event":"room_started","id":"EV_1","room":"call-42"}"#, "not an object"),
      (#"{"event":"room_started","id":"EV_1","room":{"name":42}}"#, "not a string"),
      (#"{"event":"room_started","id":"EV_1","createdAt":"soon"}"#, "not an int64"),
      (#"{"event":"room_started","id":"EV_1","createdAt":1.5}"#, "not an int64"),
      (#"{"event":"room_started","id":"EV_1","id":"EV_2"}"#, "not JSON"),
    ]
    for (text, reason) in bodies {
      let body = Array(text.utf8)
      guard case .malformedBody(let message)? = rejection(body, try LiveKitFixture.webhookToken(for: body)) else {
        Issue.record("\(text) was not refused as a malformed body")
        continue
      }
      #expect(message.contains(reason), "\(text): \(message)")
    }
  }

  @Test func errorsSayWhatWasWrong() {
    #expect(LiveKitWebhookError.unsigned.description.contains("no Authorization header"))
    #expect(LiveKitWebhookError.badContentType("text/plain").description.contains("text/plain"))
    #expect(LiveKitWebhookError.unknownAPIKey("APIx").description.contains("APIx"))
    #expect(LiveKitWebhookError.bodyHashMismatch.description.contains("sha256"))
    #expect(LiveKitWebhookError.replayed(id: "EV_1").description.contains("EV_1"))
  }
}
