import DialtoneCrypto
import DialtoneJSON
import DialtoneSupport
import Foundation

/// A LiveKit access token before signing: who it is for and what it allows. Signed, it is an
/// HS256 JWT with `iss` = API key, `sub` = identity, `nbf` = now, `exp` = now + ttl, `name`,
/// `metadata` and the `video` grant, exactly the claims LiveKit's own SDKs write.
package struct LiveKitAccessToken: Sendable, Hashable {
  /// A participant presents its token when it joins and again when it reconnects after a
  /// network change, so it has to outlive the ring and the first minutes of the call.
  package static let participantTTL: Duration = .seconds(3600)
  /// Server API tokens are minted per request, so they only need to outlive one round trip
  /// (and some clock skew to the LiveKit host).
  package static let serverTTL: Duration = .seconds(600)

  package var identity: String
  package var name: String?
  package var metadata: String?
  package var video: LiveKitVideoGrant
  package var ttl: Duration

  package init(identity: String, name: String? = nil, metadata: String? = nil, video: LiveKitVideoGrant, ttl: Duration)
  {
    self.identity = identity
    self.name = name
    self.metadata = metadata
    self.video = video
    self.ttl = ttl
  }

  /// A token that lets `identity` join `room`.
  package static func participant(
    identity: String, name: String? = nil, metadata: String? = nil, room: String, canPublish: Bool = true,
    canSubscribe: Bool = true, canPublishData: Bool = true, ttl: Duration = participantTTL
  ) -> LiveKitAccessToken {
    LiveKitAccessToken(
      identity: identity, name: name, metadata: metadata,
      video: .join(room: room, canPublish: canPublish, canSubscribe: canSubscribe, canPublishData: canPublishData),
      ttl: ttl)
  }

  /// A token for our own calls to LiveKit's server API (no identity: it joins no room).
  package static func server(_ video: LiveKitVideoGrant, ttl: Duration = serverTTL) -> LiveKitAccessToken {
    LiveKitAccessToken(identity: "", video: video, ttl: ttl)
  }

  /// Empty strings are left out rather than written as `""`, as LiveKit's SDKs do: the server
  /// reads a missing claim and an empty one alike, and the token stays short.
  package func claims(apiKey: String, now: Date) -> JWTClaims {
    var claims = JWTClaims(
      subject: identity.isEmpty ? nil : identity, issuer: apiKey, notBefore: now,
      expiresAt: now.addingTimeInterval(ttl.seconds))
    if let name, !name.isEmpty { claims["name"] = .string(name) }
    if let metadata, !metadata.isEmpty { claims["metadata"] = .string(metadata) }
    claims["video"] = video.json
    return claims
  }

  package func signed(with credentials: LiveKitCredentials, now: Date) throws(LiveKitAccessTokenError) -> String {
    guard !credentials.apiKey.isEmpty, !credentials.apiSecret.isEmpty else { throw .missingCredentials }
    guard ttl > .zero else { throw .nonPositiveTTL }
    // LiveKit refuses such a token at join time; failing here names the mistake instead.
    if video.roomJoin == true, identity.isEmpty || (video.room ?? "").isEmpty {
      throw .joinWithoutIdentityOrRoom
    }
    do {
      return try JWTSigner.hs256(secret: credentials.secretBytes).sign(
        claims: claims(apiKey: credentials.apiKey, now: now))
    } catch {
      throw .signingFailed(error)
    }
  }

  package func signed(with credentials: LiveKitCredentials, clock: any DialtoneClock) throws(LiveKitAccessTokenError)
    -> String
  {
    try signed(with: credentials, now: clock.now)
  }
}

package enum LiveKitAccessTokenError: Error, Sendable, Hashable, CustomStringConvertible {
  case missingCredentials
  case nonPositiveTTL
  case joinWithoutIdentityOrRoom
  case signingFailed(JWTError)

  package var description: String {
    switch self {
    case .missingCredentials: return "the LiveKit API key and secret must both be set"
    case .nonPositiveTTL: return "a LiveKit token needs a positive lifetime"
    case .joinWithoutIdentityOrRoom: return "a token with the roomJoin grant needs an identity and a room"
    case .signingFailed(let error): return "signing the LiveKit token failed: \(error)"
    }
  }
}
