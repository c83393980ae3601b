import DialtoneCrypto
import DialtoneJSON
import Foundation
import Testing

@Suite struct JWTVerifierTests {
  /// RFC 7515 Appendix A.1: a published HS256 JWS and its JWK "k".
  static let rfcToken =
    "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
    + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
  static let rfcKey =
    "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"
  static let rfcExp = Date(timeIntervalSince1970: 1_300_819_380)

  static let secret = utf8("a-test-secret-that-is-32-bytes!!")
  static let verifier = JWTVerifier(hs256Secret: secret)
  static let now = Date(timeIntervalSince1970: 1_700_000_000)

  static func token(_ claims: [String: JSONValue]) throws -> String {
    try JWTSigner.hs256(secret: secret).sign(claims: JWTClaims(claims))
  }

  static func expectRejection(
    _ token: String, _ error: JWTError, now: Date = now,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    #expect(throws: error, sourceLocation: sourceLocation) { try verifier.verify(token, now: now) }
  }

  @Test func rfc7515AppendixA1() throws {
    let key = try #require(Base64URL.decode(Self.rfcKey))
    let signingInput = Self.rfcToken.split(separator: ".").prefix(2).joined(separator: ".")
    #expect(
      Base64URL.encode(HMAC.sha256(key: key, message: utf8(signingInput)))
        == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")

    let claims = try JWTVerifier(hs256Secret: key).verify(Self.rfcToken, now: Self.rfcExp - 60, leeway: 0)
    #expect(claims.issuer == "joe")
    #expect(claims.expiresAt == Self.rfcExp)
    #expect(claims.bool("http://example.com/is_root") == true)

    #expect(throws: JWTError.expired) { try JWTVerifier(hs256Secret: key).verify(Self.rfcToken) }
  }

  @Test func roundTripWithKeyID() throws {
    let claims = JWTClaims(subject: "alice", issuedAt: Self.now, expiresAt: Self.now + 300, extra: ["room": "r"])
    let token = try JWTSigner.hs256(secret: Self.secret).sign(claims: claims, keyID: "k1")
    #expect(segmentObject(token, 0) == ["alg": "HS256", "typ": "JWT", "kid": "k1"])
    #expect(!token.contains("="))
    let verified = try Self.verifier.verify(token, now: Self.now)
    #expect(verified == claims)
    #expect(verified.subject == "alice")
    #expect(verified.string("room") == "r")
  }

  @Test func headerWithoutKeyID() throws {
    let token = try Self.token(["exp": 1])
    #expect(segmentObject(token, 0) == ["alg": "HS256", "typ": "JWT"])
  }

  // MARK: Algorithm pinning

  @Test func rejectsAlgNone() {
    let body = Base64URL.encode(utf8(#"{"sub":"mallory","exp":9999999999}"#))
    for alg in ["none", "None", "NONE"] {
      let header = Base64URL.encode(utf8(#"{"alg":"\#(alg)","typ":"JWT"}"#))
      Self.expectRejection("\(header).\(body).", .unsupportedAlgorithm(alg))
    }
  }

  @Test(arguments: ["RS256", "ES256", "HS384", "HS512", "hs256", "PS256", "EdDSA"])
  func rejectsOtherAlgorithms(_ alg: String) {
    // Correctly HMAC-signed with our secret, so only the pinning can reject it.
    let token = craftHS256(header: #"{"alg":"\#(alg)"}"#, payload: #"{"exp":9999999999}"#, secret: Self.secret)
    Self.expectRejection(token, .unsupportedAlgorithm(alg))
  }

  @Test(arguments: [#"{"typ":"JWT"}"#, #"{"alg":256}"#, #"{"alg":null}"#, #"{"alg":["HS256"]}"#])
  func rejectsMissingOrNonStringAlg(_ header: String) {
    let token = craftHS256(header: header, payload: #"{"exp":9999999999}"#, secret: Self.secret)
    Self.expectRejection(token, .malformed)
  }

  @Test func rejectsCriticalExtensions() {
    let token = craftHS256(
      header: #"{"alg":"HS256","crit":["b64"],"b64":false}"#, payload: #"{"exp":9999999999}"#, secret: Self.secret)
    Self.expectRejection(token, .malformed)
  }

  // MARK: Structure

  @Test func rejectsMalformedStructure() throws {
    let good = try Self.token(["exp": 9_999_999_999])
    let parts = good.split(separator: ".").map(String.init)
    let cases = [
      "", ".", "..", "...", "abc", parts[0], "\(parts[0]).\(parts[1])", "\(good).\(parts[2])",
      ".\(parts[1]).\(parts[2])", "\(parts[0])..\(parts[2])", " \(good)", "\(good) ", "\(good)\n",
      replacingSegment(good, 0, with: parts[0] + "!"),
      replacingSegment(good, 0, with: parts[0] + "="),
      replacingSegment(good, 2, with: parts[2] + "*"),
      replacingSegment(good, 2, with: parts[2] + "="),
      replacingSegment(good, 2, with: Base64.encode(Base64URL.decode(parts[2]) ?? [])),
      replacingSegment(good, 0, with: Base64URL.encode(utf8("not json"))),
      replacingSegment(good, 0, with: Base64URL.encode(utf8(#"["alg","HS256"]"#))),
      replacingSegment(good, 0, with: Base64URL.encode(utf8(#""HS256""#))),
    ]
    for token in cases {
      #expect(throws: JWTError.malformed, "token \(token.debugDescription)") {
        try Self.verifier.verify(token, now: Self.now)
      }
    }
  }

  @Test(arguments: [#""just a string""#, "[1,2]", "42", "null", "not json", ""])
  func rejectsNonObjectPayload(_ payload: String) {
    let token = craftHS256(header: #"{"alg":"HS256"}"#, payload: payload, secret: Self.secret)
    Self.expectRejection(token, .malformed)
  }

  @Test func rejectsPayloadWithBadBase64EvenIfSigned() {
    // The signature covers the segment text, so a signed but undecodable payload must still fail.
    let input = Base64URL.encode(utf8(#"{"alg":"HS256"}"#)) + ".e30*"
    let token = input + "." + Base64URL.encode(HMAC.sha256(key: Self.secret, message: utf8(input)))
    Self.expectRejection(token, .malformed)
  }

  // MARK: Signature

  @Test func rejectsBadSignatures() throws {
    let good = try Self.token(["sub": "alice", "exp": 9_999_999_999])
    let signature = try #require(Base64URL.decode(String(good.split(separator: ".")[2])))
    var flipped = signature
    flipped[0] ^= 0x01
    let cases = [
      replacingSegment(good, 2, with: Base64URL.encode(flipped)),
      replacingSegment(good, 2, with: Base64URL.encode(signature.dropLast())),
      replacingSegment(good, 2, with: Base64URL.encode(signature + [0])),
      replacingSegment(good, 2, with: ""),
      replacingSegment(good, 1, with: Base64URL.encode(utf8(#"{"sub":"mallory","exp":9999999999}"#))),
      try JWTSigner.hs256(secret: utf8("another-secret-another-secret-!!")).sign(claims: ["exp": 9_999_999_999]),
    ]
    for token in cases {
      #expect(throws: JWTError.badSignature, "token \(token)") { try Self.verifier.verify(token, now: Self.now) }
    }
  }

  @Test func signatureIsCheckedBeforeClaims() throws {
    let expired = try JWTSigner.hs256(secret: utf8("wrong-secret")).sign(claims: ["exp": 1])
    Self.expectRejection(expired, .badSignature)
  }

  /// The classic confusion: an attacker HMACs with the RS256 public key as the secret.
  @Test func rejectsHS256AgainstAnAsymmetricVerifier() throws {
    let signer = try JWTSigner.generateES256()
    let publicPEM = try #require(signer.publicKeyPEM)
    let forged = craftHS256(header: #"{"alg":"HS256"}"#, payload: #"{"exp":9999999999}"#, secret: utf8(publicPEM))
    let verifier = try JWTVerifier(es256PublicKeyPEM: publicPEM)
    #expect(throws: JWTError.unsupportedAlgorithm("HS256")) { try verifier.verify(forged, now: Self.now) }
  }

  // MARK: Time claims

  @Test func requiresExp() throws {
    Self.expectRejection(try Self.token(["sub": "alice"]), .missingClaim("exp"))
    Self.expectRejection(try Self.token(["exp": "9999999999"]), .invalidClaim("exp"))
    Self.expectRejection(try Self.token(["exp": .null]), .invalidClaim("exp"))
  }

  @Test func expiryHonoursLeeway() throws {
    let now = Self.now.timeIntervalSince1970
    Self.expectRejection(try Self.token(["exp": .double(now - 31)]), .expired)
    Self.expectRejection(try Self.token(["exp": .double(now - 30)]), .expired)
    #expect(throws: Never.self) { try Self.verifier.verify(try Self.token(["exp": .double(now - 29)]), now: Self.now) }
    #expect(throws: JWTError.expired) {
      try Self.verifier.verify(try Self.token(["exp": .double(now - 1)]), now: Self.now, leeway: 0)
    }
    #expect(throws: JWTError.expired) {
      try Self.verifier.verify(try Self.token(["exp": .double(now - 1)]), now: Self.now, leeway: -100)
    }
  }

  @Test func notBeforeHonoursLeeway() throws {
    let now = Self.now.timeIntervalSince1970
    let exp = JSONValue.double(now + 3600)
    Self.expectRejection(try Self.token(["exp": exp, "nbf": .double(now + 31)]), .notYetValid)
    #expect(throws: Never.self) {
      try Self.verifier.verify(try Self.token(["exp": exp, "nbf": .double(now + 29)]), now: Self.now)
    }
    Self.expectRejection(try Self.token(["exp": exp, "nbf": "soon"]), .invalidClaim("nbf"))
  }

  @Test func issuedAtInTheFutureIsRejected() throws {
    let now = Self.now.timeIntervalSince1970
    let exp = JSONValue.double(now + 3600)
    Self.expectRejection(try Self.token(["exp": exp, "iat": .double(now + 3000)]), .notYetValid)
    #expect(throws: Never.self) {
      try Self.verifier.verify(try Self.token(["exp": exp, "iat": .double(now + 10)]), now: Self.now)
    }
    Self.expectRejection(try Self.token(["exp": exp, "iat": true]), .invalidClaim("iat"))
  }

  @Test func strictJSONInsideTheToken() throws {
    func token(header: String = #"{"alg":"HS256"}"#, _ payload: String) -> String {
      craftHS256(header: header, payload: payload, secret: Self.secret)
    }
    // Duplicate member names are refused (RFC 7515 §5.2), in the payload and in the header.
    Self.expectRejection(token(#"{"exp":1,"exp":9999999999}"#), .malformed)
    Self.expectRejection(token(header: #"{"alg":"HS256","alg":"none"}"#, #"{"exp":9999999999}"#), .malformed)
    // So are invalid UTF-8, lone surrogates and numbers beyond Double.
    let badUTF8 = utf8(#"{"exp":9999999999,"s":""#) + [0xC3, 0x28] + utf8(#""}"#)
    let input = Base64URL.encode(utf8(#"{"alg":"HS256"}"#)) + "." + Base64URL.encode(badUTF8)
    Self.expectRejection(
      input + "." + Base64URL.encode(HMAC.sha256(key: Self.secret, message: utf8(input))), .malformed)
    Self.expectRejection(token(#"{"exp":9999999999,"s":"\ud800"}"#), .malformed)
    Self.expectRejection(token(#"{"exp":1e400}"#), .malformed)
    // Nesting: 64 levels in all are accepted, 65 are not.
    let nested = { (levels: Int) in
      #"{"exp":9999999999,"x":"# + String(repeating: "[", count: levels - 1) + String(repeating: "]", count: levels - 1)
        + "}"
    }
    #expect(throws: Never.self) { try Self.verifier.verify(token(nested(64)), now: Self.now) }
    Self.expectRejection(token(nested(65)), .malformed)
  }

  @Test func emptySecretIsRefused() throws {
    let token = craftHS256(header: #"{"alg":"HS256"}"#, payload: #"{"exp":9999999999}"#, secret: [])
    #expect(throws: JWTError.invalidKey("empty HS256 secret")) {
      try JWTVerifier(hs256Secret: []).verify(token, now: Self.now)
    }
    #expect(throws: JWTError.invalidKey("empty HS256 secret")) {
      try JWTSigner.hs256(secret: []).sign(claims: ["exp": 1])
    }
  }

  @Test func errorsDescribeThemselves() {
    let errors: [JWTError] = [
      .malformed, .unsupportedAlgorithm("none"), .badSignature, .expired, .notYetValid,
      .missingClaim("exp"), .invalidClaim("nbf"), .invalidKey("x"), .signingFailed("y"),
    ]
    #expect(Set(errors.map(\.description)).count == errors.count)
    #expect(JWTError.unsupportedAlgorithm("none").description.contains("none"))
    #expect(JWTError.missingClaim("exp").description.contains("exp"))
  }
}
