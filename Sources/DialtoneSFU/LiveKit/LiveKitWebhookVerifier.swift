import DialtoneCrypto
import DialtoneJSON
import DialtoneSupport
import Foundation

/// Checks that a webhook request came from a LiveKit server holding one of our API keys and
/// carries the body that server signed, then parses the event. LiveKit signs each webhook with
/// a short-lived token (five minutes) whose `iss` is the API key and whose `sha256` claim is the
/// standard base64 SHA-256 of the exact body bytes.
///
/// Stateless: replays of a captured request within the token's lifetime are the
/// `LiveKitWebhookReplayGuard`'s job.
package struct LiveKitWebhookVerifier: Sendable {
  package static let contentType = "application/webhook+json"
  /// LiveKit's own verifiers allow a minute of clock skew.
  package static let defaultLeeway: Duration = .seconds(60)

  private let secrets: [String: [UInt8]]
  package let leeway: Duration

  /// `keys` maps API key → secret; several keys let a key be rotated without dropping
  /// webhooks. Keys with an empty secret are ignored: an empty HMAC key would let anyone sign.
  package init(keys: [String: String], leeway: Duration = defaultLeeway) {
    secrets = keys.filter { !$0.key.isEmpty && !$0.value.isEmpty }.mapValues { Array($0.utf8) }
    self.leeway = leeway
  }

  package init(credentials: LiveKitCredentials, leeway: Duration = defaultLeeway) {
    self.init(keys: [credentials.apiKey: credentials.apiSecret], leeway: leeway)
  }

  /// `body` must be the bytes exactly as received: the hash is over them, not over any
  /// re-encoding. `authorization` is the header's value: LiveKit sends the bare token, a
  /// `Bearer ` prefix is accepted too.
  package func verify(body: [UInt8], authorization: String?, contentType: String?, now: Date)
    throws(LiveKitWebhookError)
    -> LiveKitWebhookEvent
  {
    // The media type first: it is what tells a LiveKit webhook from any other POST, and it
    // costs nothing to check before the signature.
    guard Self.isWebhookMediaType(contentType) else { throw .badContentType(contentType) }
    let token = try Self.bareToken(authorization)
    let claims = try verifiedClaims(token, now: now)
    guard let claimed = claims.string("sha256"), !claimed.isEmpty else { throw .missingBodyHash }
    guard let claimedDigest = Base64.decode(claimed), ConstantTime.equals(claimedDigest, SHA256.hash(body)) else {
      throw .bodyHashMismatch
    }
    return try LiveKitWebhookEvent.parse(body)
  }

  private func verifiedClaims(_ token: String, now: Date) throws(LiveKitWebhookError) -> JWTClaims {
    // The secret depends on the key the token names, so `iss` is read before the signature is
    // checked; nothing else from the unverified payload is used.
    let apiKey = try Self.unverifiedIssuer(token)
    guard let secret = secrets[apiKey] else { throw .unknownAPIKey(apiKey) }
    let claims: JWTClaims
    do {
      claims = try JWTVerifier(hs256Secret: secret).verify(token, now: now, leeway: leeway.seconds)
    } catch {
      throw Self.webhookError(error)
    }
    guard claims.issuer == apiKey else { throw .malformedToken("\"iss\" is not the API key") }
    return claims
  }

  package static func isWebhookMediaType(_ contentType: String?) -> Bool {
    guard let contentType, let type = contentType.split(separator: ";", omittingEmptySubsequences: false).first
    else { return false }
    return type.trimmingCharacters(in: .whitespaces).lowercased() == Self.contentType
  }

  package static func bareToken(_ authorization: String?) throws(LiveKitWebhookError) -> String {
    var value = (authorization ?? "").trimmingCharacters(in: .whitespaces)
    let lowered = value.lowercased()
    if lowered == "bearer" || lowered.hasPrefix("bearer ") {
      value = String(value.dropFirst("bearer".count)).trimmingCharacters(in: .whitespaces)
    }
    guard !value.isEmpty else { throw .unsigned }
    return value
  }

  private static func unverifiedIssuer(_ token: String) throws(LiveKitWebhookError) -> String {
    let segments = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard segments.count == 3, let payload = Base64URL.decode(String(decoding: segments[1], as: UTF8.self)),
      let claims = JSONValue(parsing: payload)?.objectValue
    else { throw .malformedToken("not a compact JWT") }
    guard let issuer = claims["iss"]?.stringValue, !issuer.isEmpty else {
      throw .malformedToken("no \"iss\" (the API key)")
    }
    return issuer
  }

  private static func webhookError(_ error: JWTError) -> LiveKitWebhookError {
    switch error {
    case .malformed: return .malformedToken("not a compact JWT")
    case .unsupportedAlgorithm(let alg): return .unsupportedAlgorithm(alg)
    case .badSignature: return .badSignature
    case .expired: return .expired
    case .notYetValid: return .notYetValid
    case .missingClaim(let name): return .malformedToken("no \"\(name)\"")
    case .invalidClaim(let name): return .malformedToken("\"\(name)\" has the wrong type")
    // Empty secrets are filtered out at init, so these cannot come from a usable key.
    case .invalidKey, .signingFailed: return .badSignature
    }
  }
}
