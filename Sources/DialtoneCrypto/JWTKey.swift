/// The key material behind a signer or verifier; each case fixes its algorithm,
/// which is how verification stays pinned to one algorithm.
enum JWTKey: Sendable {
  case hmacSHA256([UInt8])
  case ecdsaP256(EVPKey)
  case rsaSHA256(EVPKey)

  static let p256CoordinateSize = 32
  static let minimumRSABits = 2048

  var algorithm: JWTAlgorithm {
    switch self {
    case .hmacSHA256: return .hs256
    case .ecdsaP256: return .es256
    case .rsaSHA256: return .rs256
    }
  }

  static func es256(_ key: EVPKey) throws(JWTError) -> JWTKey {
    guard key.isP256 else { throw .invalidKey("ES256 needs an EC P-256 key") }
    return .ecdsaP256(key)
  }

  static func rs256(_ key: EVPKey) throws(JWTError) -> JWTKey {
    guard key.isA("RSA") else { throw .invalidKey("RS256 needs an RSA key") }
    guard key.bits >= minimumRSABits else {
      throw .invalidKey("RSA key has \(key.bits) bits; RS256 needs at least \(minimumRSABits)")
    }
    return .rsaSHA256(key)
  }

  /// An empty HMAC secret, typically an unset configuration value, would let
  /// anyone mint tokens; refuse to sign or verify with it.
  func checkUsable() throws(JWTError) {
    if case .hmacSHA256(let secret) = self, secret.isEmpty { throw .invalidKey("empty HS256 secret") }
  }

  func sign(_ input: [UInt8]) throws(JWTError) -> [UInt8] {
    try checkUsable()
    switch self {
    case .hmacSHA256(let secret):
      return HMAC.sha256(key: secret, message: input)
    case .ecdsaP256(let key):
      guard let der = key.signSHA256(input),
        let jose = ECDSASignature.jose(fromDER: der, coordinateSize: Self.p256CoordinateSize)
      else { throw .signingFailed("ECDSA P-256 signing failed") }
      return jose
    case .rsaSHA256(let key):
      guard let signature = key.signSHA256(input) else { throw .signingFailed("RSA signing failed") }
      return signature
    }
  }

  func verify(_ input: [UInt8], signature: [UInt8]) -> Bool {
    switch self {
    case .hmacSHA256(let secret):
      return ConstantTime.equals(HMAC.sha256(key: secret, message: input), signature)
    case .ecdsaP256(let key):
      // A DER signature or any other length is rejected here, never reinterpreted.
      guard let der = ECDSASignature.der(fromJOSE: signature, coordinateSize: Self.p256CoordinateSize) else {
        return false
      }
      return key.verifySHA256(input, signature: der)
    case .rsaSHA256(let key):
      return key.verifySHA256(input, signature: signature)
    }
  }
}
