import DialtoneCrypto
import DialtoneJSON
import DialtoneTestSupport
import Foundation
import Testing

/// Interoperability with PyJWT, an independent JOSE implementation, in both directions.
@Suite struct JWTCrossCheckTests {
  static let secret = utf8("cross-check-secret-of-32-bytes!!")

  static func claims(_ subject: String) -> JWTClaims {
    let now = Date()
    return JWTClaims(subject: subject, issuer: "dialtone", issuedAt: now, expiresAt: now + 600, extra: ["n": 42])
  }

  static func expected(_ claims: JWTClaims) throws -> String {
    claims.json.serializedString
  }

  @Test func pythonAndPyJWTAreInstalled() throws {
    let version = try CrossCheck.succeed(["check"])
    #expect(version.hasPrefix("pyjwt "))
  }

  @Test func pyJWTVerifiesOurHS256() throws {
    let claims = Self.claims("hs")
    let token = try JWTSigner.hs256(secret: Self.secret).sign(claims: claims, keyID: "h1")
    _ = try CrossCheck.succeed([
      "verify", "--alg", "HS256", "--secret-hex", hexString(Self.secret), "--token", token,
      "--expect-claims", try Self.expected(claims), "--expect-kid", "h1",
    ])
  }

  @Test(arguments: ["ec_p256.p8", "ec_p256.sec1.pem"])
  func pyJWTVerifiesOurES256(_ keyFile: String) throws {
    let signer = try JWTSigner.es256(pkcs8PEM: try CrossCheck.key(keyFile))
    let claims = Self.claims("es")
    let token = try signer.sign(claims: claims, keyID: "ABC123DEFG")
    _ = try CrossCheck.succeed([
      "verify", "--alg", "ES256", "--key-pem", try CrossCheck.key("ec_p256.pub.pem"), "--token", token,
      "--expect-claims", try Self.expected(claims), "--expect-kid", "ABC123DEFG",
    ])
    #expect(signer.publicKeyPEM == (try CrossCheck.key("ec_p256.pub.pem")))
  }

  /// `openssl ecparam -genkey` writes an "EC PARAMETERS" block before the key.
  @Test func es256KeyAfterECParametersBlock() throws {
    let parameters = "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
    let signer = try JWTSigner.es256(pkcs8PEM: parameters + (try CrossCheck.key("ec_p256.sec1.pem")))
    #expect(signer.publicKeyPEM == (try CrossCheck.key("ec_p256.pub.pem")))
  }

  @Test(arguments: ["rsa2048.pkcs1.pem", "rsa2048.pkcs8.pem"])
  func pyJWTVerifiesOurRS256(_ keyFile: String) throws {
    let signer = try JWTSigner.rs256(pem: try CrossCheck.key(keyFile))
    #expect(signer.algorithm == .rs256)
    let claims = Self.claims("rs")
    let token = try signer.sign(claims: claims)
    _ = try CrossCheck.succeed([
      "verify", "--alg", "RS256", "--key-pem", try CrossCheck.key("rsa2048.pub.pem"), "--token", token,
      "--expect-claims", try Self.expected(claims),
    ])
    let ours = try JWTVerifier(rs256PublicKeyPEM: try CrossCheck.key("rsa2048.pub.pem"))
    #expect(try ours.verify(token) == claims)
  }

  @Test func rs256FromServiceAccountJSON() throws {
    let json = try CrossCheck.key("service_account.json")
    let account = try #require(JSONValue(parsing: utf8(json)))
    let pem = try #require(account["private_key"]?.stringValue)
    let claims = Self.claims("sa")
    let token = try JWTSigner.rs256(pem: pem).sign(claims: claims, keyID: account["private_key_id"]?.stringValue)
    _ = try CrossCheck.succeed([
      "verify", "--alg", "RS256", "--key-pem", try CrossCheck.key("rsa2048.pub.pem"), "--token", token,
      "--expect-claims", try Self.expected(claims), "--expect-kid", "0123456789abcdef",
    ])
  }

  /// Guards against a vacuous checker: PyJWT must refuse a token we tampered with.
  @Test func pyJWTRejectsTamperedTokens() throws {
    let token = try JWTSigner.hs256(secret: Self.secret).sign(claims: Self.claims("hs"))
    let forged = replacingSegment(token, 1, with: Base64URL.encode(Self.claims("mallory").json.serialized))
    let output = try CrossCheck.run([
      "verify", "--alg", "HS256", "--secret-hex", hexString(Self.secret), "--token", forged,
    ])
    #expect(output.status == 1, "stderr: \(output.stderr)")
  }

  @Test func weAcceptPyJWTHS256() throws {
    let expiry = Int(Date().timeIntervalSince1970) + 600
    let token = try CrossCheck.succeed([
      "sign", "--alg", "HS256", "--secret-hex", hexString(Self.secret),
      "--claims", #"{"sub":"from-python","exp":\#(expiry),"room":"r1"}"#, "--kid", "p1",
    ])
    let claims = try JWTVerifier(hs256Secret: Self.secret).verify(token)
    #expect(claims.subject == "from-python")
    #expect(claims.string("room") == "r1")
    #expect(claims.int("exp") == expiry)
    #expect(throws: JWTError.badSignature) { try JWTVerifier(hs256Secret: utf8("other")).verify(token) }
  }

  @Test func weAcceptPyJWTES256AndRS256() throws {
    let expiry = Int(Date().timeIntervalSince1970) + 600
    let es = try CrossCheck.succeed([
      "sign", "--alg", "ES256", "--key-pem", try CrossCheck.key("ec_p256.p8"),
      "--claims", #"{"sub":"es","exp":\#(expiry)}"#,
    ])
    let rs = try CrossCheck.succeed([
      "sign", "--alg", "RS256", "--key-pem", try CrossCheck.key("rsa2048.pkcs8.pem"),
      "--claims", #"{"sub":"rs","exp":\#(expiry)}"#,
    ])
    let esVerifier = try JWTVerifier(es256PublicKeyPEM: try CrossCheck.key("ec_p256.pub.pem"))
    let rsVerifier = try JWTVerifier(rs256PublicKeyPEM: try CrossCheck.key("rsa2048.pub.pem"))
    #expect(try esVerifier.verify(es).subject == "es")
    #expect(try rsVerifier.verify(rs).subject == "rs")
    #expect(throws: JWTError.unsupportedAlgorithm("RS256")) { try esVerifier.verify(rs) }
    #expect(throws: JWTError.unsupportedAlgorithm("ES256")) { try rsVerifier.verify(es) }
  }

  @Test func rejectsUnsuitableKeys() throws {
    let p384 = try CrossCheck.key("ec_p384.p8")
    let rsa2048 = try CrossCheck.key("rsa2048.pkcs8.pem")
    let rsa2048Public = try CrossCheck.key("rsa2048.pub.pem")
    let rsa1024 = try CrossCheck.key("rsa1024.pkcs8.pem")
    let p256 = try CrossCheck.key("ec_p256.p8")
    let encrypted = try CrossCheck.key("rsa2048.encrypted.pem")
    #expect(throws: JWTError.self) { try JWTSigner.es256(pkcs8PEM: p384) }
    #expect(throws: JWTError.self) { try JWTSigner.es256(pkcs8PEM: rsa2048) }
    #expect(throws: JWTError.self) { try JWTSigner.rs256(pem: rsa1024) }
    #expect(throws: JWTError.self) { try JWTSigner.rs256(pem: p256) }
    #expect(throws: JWTError.self) { try JWTVerifier(es256PublicKeyPEM: rsa2048Public) }
    // Encrypted keys must fail fast rather than prompt for a passphrase on the terminal.
    do {
      _ = try JWTSigner.rs256(pem: encrypted)
      Issue.record("an encrypted key was accepted")
    } catch {
      #expect(error.description.hasPrefix("invalid key"))
    }
  }
}
