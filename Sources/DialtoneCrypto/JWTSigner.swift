/// Mints compact JWS tokens (RFC 7515 §7.1) for one algorithm and key.
import DialtoneJSON

public struct JWTSigner: Sendable {
  let key: JWTKey

  public var algorithm: JWTAlgorithm { key.algorithm }

  public static func hs256(secret: [UInt8]) -> JWTSigner {
    JWTSigner(key: .hmacSHA256(secret))
  }

  /// An EC P-256 private key, e.g. an Apple APNs/.p8 key (PKCS#8 PEM). SEC1
  /// "EC PRIVATE KEY" PEM is accepted as well.
  public static func es256(pkcs8PEM pem: String) throws(JWTError) -> JWTSigner {
    JWTSigner(key: try .es256(EVPKey.loadPrivate(pem: pem)))
  }

  /// An RSA private key in PKCS#8 or PKCS#1 PEM, e.g. a Google service account's `private_key`.
  public static func rs256(pem: String) throws(JWTError) -> JWTSigner {
    JWTSigner(key: try .rs256(EVPKey.loadPrivate(pem: pem)))
  }

  /// A fresh P-256 key, for mocks and tests that need an ES256 issuer of their own.
  public static func generateES256() throws(JWTError) -> JWTSigner {
    JWTSigner(key: try .es256(EVPKey.generateP256()))
  }

  /// SubjectPublicKeyInfo PEM of an asymmetric key; nil for HS256.
  public var publicKeyPEM: String? {
    switch key {
    case .hmacSHA256: return nil
    case .ecdsaP256(let evp), .rsaSHA256(let evp): return evp.publicKeyPEM()
    }
  }

  /// PKCS#8 PEM of an asymmetric key (the .p8 shape); nil for HS256.
  public func privateKeyPEM() -> String? {
    switch key {
    case .hmacSHA256: return nil
    case .ecdsaP256(let evp), .rsaSHA256(let evp): return evp.privateKeyPEM()
    }
  }

  /// Header is `{"alg":…,"kid":…,"typ":"JWT"}`; keys are sorted, `kid` only when given.
  public func sign(claims: JWTClaims, keyID: String? = nil) throws(JWTError) -> String {
    var header: [String: JSONValue] = ["alg": .string(algorithm.rawValue), "typ": "JWT"]
    if let keyID { header["kid"] = .string(keyID) }
    // The writer would silently put `null` for a NaN or infinite number, signing a claim
    // the caller never asked for: refuse instead.
    guard !claims.json.containsNonFiniteNumber else {
      throw .signingFailed("claims are not representable as JSON (a number is NaN or infinite)")
    }
    let headerJSON = JSONValue.object(header).serialized
    let payloadJSON = claims.json.serialized
    let signingInput = Base64URL.encode(headerJSON) + "." + Base64URL.encode(payloadJSON)
    let signature = try key.sign(Array(signingInput.utf8))
    return signingInput + "." + Base64URL.encode(signature)
  }
}
