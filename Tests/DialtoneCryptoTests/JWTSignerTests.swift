import DialtoneCrypto
import DialtoneJSON
import Foundation
import Testing

@Suite struct JWTSignerTests {
  static let now = Date(timeIntervalSince1970: 1_700_000_000)
  static let claims = JWTClaims(subject: "device-1", issuer: "TEAMID", issuedAt: now, expiresAt: now + 600)

  static func signatureBytes(_ token: String) -> [UInt8]? {
    Base64URL.decode(String(token.split(separator: ".", omittingEmptySubsequences: false)[2]))
  }

  /// Minimal DER INTEGER encoding of an unsigned big-endian value.
  static func derInteger(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
    var value = Array(bytes.drop { $0 == 0 })
    if value.isEmpty || value[0] & 0x80 != 0 { value.insert(0, at: 0) }
    return [0x02, UInt8(value.count)] + value
  }

  @Test func es256SignatureIsRaw64BytesAndVerifies() throws {
    let signer = try JWTSigner.generateES256()
    #expect(signer.algorithm == .es256)
    let verifier = try JWTVerifier(es256PublicKeyPEM: try #require(signer.publicKeyPEM))
    // ECDSA r and s have leading zero bytes now and then; many tokens exercise the padding.
    for _ in 0..<64 {
      let token = try signer.sign(claims: Self.claims, keyID: "ABC123DEFG")
      #expect(Self.signatureBytes(token)?.count == 64)
      #expect(try verifier.verify(token, now: Self.now) == Self.claims)
    }
    let token = try signer.sign(claims: Self.claims, keyID: "ABC123DEFG")
    #expect(segmentObject(token, 0) == ["alg": "ES256", "typ": "JWT", "kid": "ABC123DEFG"])
  }

  @Test func es256RejectsTamperingAndDERSignatures() throws {
    let signer = try JWTSigner.generateES256()
    let verifier = JWTVerifier(matching: signer)
    let token = try signer.sign(claims: Self.claims)
    let raw = try #require(Self.signatureBytes(token))

    let body = Self.derInteger(raw[0..<32]) + Self.derInteger(raw[32..<64])
    let der = [0x30, UInt8(body.count)] + body
    let cases = [
      replacingSegment(token, 2, with: Base64URL.encode(der)),
      replacingSegment(token, 2, with: Base64URL.encode(raw[32..<64] + raw[0..<32])),
      replacingSegment(token, 2, with: Base64URL.encode([UInt8](repeating: 0, count: 64))),
      replacingSegment(token, 2, with: Base64URL.encode(raw.dropLast())),
      replacingSegment(token, 1, with: Base64URL.encode(utf8(#"{"exp":9999999999,"sub":"device-2"}"#))),
      try JWTSigner.generateES256().sign(claims: Self.claims),
    ]
    for forged in cases {
      #expect(throws: JWTError.badSignature) { try verifier.verify(forged, now: Self.now) }
    }
  }

  @Test func es256KeyRoundTripsThroughPKCS8PEM() throws {
    let original = try JWTSigner.generateES256()
    let pem = try #require(original.privateKeyPEM())
    #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    let reloaded = try JWTSigner.es256(pkcs8PEM: pem)
    #expect(reloaded.publicKeyPEM == original.publicKeyPEM)
    let token = try reloaded.sign(claims: Self.claims)
    #expect(throws: Never.self) { try JWTVerifier(matching: original).verify(token, now: Self.now) }

    // Literal "\n" escapes, as service-account JSON pasted into an env var keeps them.
    let escaped = pem.replacingOccurrences(of: "\n", with: "\\n")
    #expect(try JWTSigner.es256(pkcs8PEM: escaped).publicKeyPEM == original.publicKeyPEM)
  }

  @Test func hs256SignerHasNoKeyPEM() {
    let signer = JWTSigner.hs256(secret: utf8("s"))
    #expect(signer.algorithm == .hs256)
    #expect(signer.publicKeyPEM == nil)
    #expect(signer.privateKeyPEM() == nil)
  }

  @Test(arguments: [
    "", "not a pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
  ])
  func rejectsGarbageKeys(_ pem: String) {
    #expect(throws: JWTError.self) { try JWTSigner.es256(pkcs8PEM: pem) }
    #expect(throws: JWTError.self) { try JWTSigner.rs256(pem: pem) }
    #expect(throws: JWTError.self) { try JWTVerifier(es256PublicKeyPEM: pem) }
    #expect(throws: JWTError.self) { try JWTVerifier(rs256PublicKeyPEM: pem) }
  }

  @Test func rejectsECKeyForRS256() throws {
    let pem = try #require(try JWTSigner.generateES256().privateKeyPEM())
    #expect(throws: JWTError.self) { try JWTSigner.rs256(pem: pem) }
    #expect(throws: JWTError.self) { try JWTVerifier(rs256PublicKeyPEM: pem) }
  }

  @Test func unencodableClaimsFailToSign() {
    let signer = JWTSigner.hs256(secret: utf8("s"))
    for claims: JWTClaims in [["exp": .double(.nan)], ["exp": 1, "x": ["y": [.double(-.infinity)]]]] {
      #expect {
        try signer.sign(claims: claims)
      } throws: { error in
        guard case .signingFailed = error as? JWTError else { return false }
        return true
      }
    }
  }

  @Test func signersAndVerifiersAreSendable() async throws {
    let signer = try JWTSigner.generateES256()
    let verifier = JWTVerifier(matching: signer)
    let results = try await withThrowingTaskGroup(of: JWTClaims.self) { group in
      for index in 0..<16 {
        group.addTask {
          try verifier.verify(try signer.sign(claims: ["exp": 9_999_999_999, "n": .int(Int64(index))]))
        }
      }
      return try await group.reduce(into: [JWTClaims]()) { $0.append($1) }
    }
    #expect(Set(results.compactMap { $0.int("n") }) == Set(0..<16))
  }
}
