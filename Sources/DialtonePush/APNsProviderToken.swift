import DialtoneCrypto
import Foundation

/// The ES256 provider token APNs authenticates us with. Apple rejects tokens older than an hour
/// and throttles providers that mint them too often, so one is reused for up to 50 minutes and
/// replaced early only when APNs answers `ExpiredProviderToken`.
final class APNsProviderToken: @unchecked Sendable {
  // @unchecked: `current` is only touched under `lock`.
  private let lock = NSLock()
  private let signer: JWTSigner
  private let keyID: String
  private let teamID: String
  private let maxAge: TimeInterval
  private var current: (token: String, issuedAt: Date)?

  init(p8PEM: String, keyID: String, teamID: String, maxAge: TimeInterval = 50 * 60) throws {
    signer = try JWTSigner.es256(pkcs8PEM: p8PEM)
    self.keyID = keyID
    self.teamID = teamID
    self.maxAge = maxAge
  }

  func token(now: Date) throws -> String {
    try lock.withLock {
      if let current, now.timeIntervalSince(current.issuedAt) < maxAge { return current.token }
      let token = try signer.sign(claims: JWTClaims(issuer: teamID, issuedAt: now), keyID: keyID)
      current = (token, now)
      return token
    }
  }

  /// Drops `token` if it is still the current one (several failed pushes may report it at once).
  func invalidate(_ token: String) {
    lock.withLock { if current?.token == token { current = nil } }
  }
}
