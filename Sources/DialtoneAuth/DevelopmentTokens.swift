import DialtoneCrypto
import DialtoneJSON
import Foundation

/// Mints client tokens the way an app backend would (used by `dialtone token` and tests).
public enum DevelopmentTokens {
  public static func mint(
    secret: [UInt8], user: String, device: String?, name: String?, ttl: TimeInterval,
    now: Date = Date()
  ) throws -> String {
    var claims = JWTClaims(subject: user, issuedAt: now, expiresAt: now.addingTimeInterval(ttl))
    if let device { claims["device"] = .string(device) }
    if let name { claims["name"] = .string(name) }
    return try JWTSigner.hs256(secret: secret).sign(claims: claims)
  }
}
