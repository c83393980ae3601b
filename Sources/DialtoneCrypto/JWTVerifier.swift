import DialtoneJSON
import Foundation

/// Verifies compact JWTs signed with exactly one algorithm and key. The token's
/// `alg` header must name that algorithm: trusting the header is what enables
/// `alg: none` and HS256-with-a-public-key confusion attacks.
public struct JWTVerifier: Sendable {
  let key: JWTKey

  public var algorithm: JWTAlgorithm { key.algorithm }

  public init(hs256Secret: [UInt8]) {
    key = .hmacSHA256(hs256Secret)
  }

  /// A P-256 public key PEM ("PUBLIC KEY"); a private key PEM also works.
  public init(es256PublicKeyPEM pem: String) throws(JWTError) {
    key = try .es256(EVPKey.loadPublic(pem: pem))
  }

  /// An RSA public key PEM ("PUBLIC KEY"); a private key PEM also works.
  public init(rs256PublicKeyPEM pem: String) throws(JWTError) {
    key = try .rs256(EVPKey.loadPublic(pem: pem))
  }

  /// Verifies what `signer` signs: the same secret for HS256, otherwise its key pair.
  public init(matching signer: JWTSigner) {
    key = signer.key
  }

  /// `exp` is required. `exp`, `nbf` and `iat` are checked against `now` with
  /// `leeway` seconds of tolerance for clock skew; `iat` in the future counts as
  /// not yet valid. Audience and issuer are left to the caller.
  public func verify(_ token: String, now: Date = Date(), leeway: TimeInterval = 30) throws(JWTError) -> JWTClaims {
    try key.checkUsable()
    let compact = try JWTCompact.parse(token)
    guard let alg = compact.header["alg"]?.stringValue else { throw .malformed }
    guard alg == algorithm.rawValue else { throw .unsupportedAlgorithm(alg) }
    // We implement no JWS extensions, so any critical one must be refused (RFC 7515 §4.1.11).
    guard compact.header["crit"] == nil else { throw .malformed }
    guard key.verify(compact.signingInput, signature: compact.signature) else { throw .badSignature }

    let claims = JWTClaims(try compact.payload())
    try checkTimes(claims, now: now.timeIntervalSince1970, leeway: leeway.isFinite ? max(0, leeway) : 0)
    return claims
  }

  private func checkTimes(_ claims: JWTClaims, now: Double, leeway: Double) throws(JWTError) {
    guard let exp = try numericDate("exp", in: claims) else { throw .missingClaim("exp") }
    guard now < exp + leeway else { throw .expired }
    if let nbf = try numericDate("nbf", in: claims), nbf > now + leeway { throw .notYetValid }
    if let iat = try numericDate("iat", in: claims), iat > now + leeway { throw .notYetValid }
  }

  private func numericDate(_ name: String, in claims: JWTClaims) throws(JWTError) -> Double? {
    guard let value = claims[name] else { return nil }
    guard let seconds = value.doubleValue, seconds.isFinite else { throw .invalidClaim(name) }
    return seconds
  }
}
