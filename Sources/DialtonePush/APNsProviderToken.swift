import DialtoneCrypto
import DialtoneSupport
import Foundation

/// The ES256 provider token APNs authenticates us with. Apple rejects tokens older than an hour
/// and throttles providers that mint them too often, so one is reused for up to 50 minutes and
/// replaced early only when APNs answers `ExpiredProviderToken`.
final class APNsProviderToken: Sendable {
  private let signer: JWTSigner
  private let keyID: String
  private let teamID: String
  private let maxAge: TimeInterval
  private let minted = Locked<(token: String, issuedAt: Date)?>(nil)

  init(p8PEM: String, keyID: String, teamID: String, maxAge: TimeInterval = 50 * 60) throws {
    signer = try JWTSigner.es256(pkcs8PEM: p8PEM)
    self.keyID = keyID
    self.teamID = teamID
    self.maxAge = maxAge
  }

  func token(now: Date) throws -> String {
    // Signing under the lock: concurrent pushes wait for one new token rather than each minting one.
    try minted.withLock { current in
      if let current, now.timeIntervalSince(current.issuedAt) < maxAge { return current.token }
      let token = try signer.sign(claims: JWTClaims(issuer: teamID, issuedAt: now), keyID: keyID)
      current = (token, now)
      return token
    }
  }

  /// Drops `token` if it is still the current one (several failed pushes may report it at once).
  func invalidate(_ token: String) {
    minted.withLock { if $0?.token == token { $0 = nil } }
  }
}
