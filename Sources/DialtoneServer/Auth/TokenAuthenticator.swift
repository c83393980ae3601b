import DialtoneCrypto
import DialtoneProtocol
import Foundation

public struct AuthenticationError: Error, Sendable, Equatable, CustomStringConvertible {
  public let description: String
}

/// Verifies the app backend's HS256 tokens: `sub` (user), `device`, `name`, `exp`.
public struct TokenAuthenticator: Sendable {
  private let verifier: JWTVerifier
  private let now: @Sendable () -> Date

  public init(secret: [UInt8], now: @escaping @Sendable () -> Date = Date.init) {
    verifier = JWTVerifier(hs256Secret: secret)
    self.now = now
  }

  public func authenticate(_ token: String) throws(AuthenticationError) -> Identity {
    let claims: JWTClaims
    do {
      claims = try verifier.verify(token, now: now())
    } catch {
      throw AuthenticationError(description: "invalid token: \(error)")
    }
    guard let user = claims.subject, !user.isEmpty else {
      throw AuthenticationError(description: "token has no \"sub\" claim")
    }
    guard user.utf8.count <= Limits.maxUserIDBytes else {
      throw AuthenticationError(description: "\"sub\" exceeds \(Limits.maxUserIDBytes) bytes")
    }
    let device = claims.string("device") ?? "default"
    guard !device.isEmpty, device.utf8.count <= Limits.maxDeviceIDBytes else {
      throw AuthenticationError(description: "\"device\" must be 1...\(Limits.maxDeviceIDBytes) bytes")
    }
    var name = claims.string("name")
    if let n = name, n.utf8.count > Limits.maxNameBytes {
      name = String(decoding: Array(n.utf8.prefix(Limits.maxNameBytes)), as: UTF8.self)
    }
    return Identity(userId: user, deviceId: device, name: name)
  }
}
