/// Why a webhook request was refused. Every case but `replayed` means the request did not come
/// from a LiveKit server holding one of our keys (or was altered on the way) and gets a 401 or
/// 400; `replayed` means it did once, and can be answered 200 so LiveKit stops retrying.
package enum LiveKitWebhookError: Error, Sendable, Hashable, CustomStringConvertible {
  /// LiveKit sends `application/webhook+json` precisely so that no generic JSON handler parses
  /// the body before its signature is checked.
  case badContentType(String?)
  /// No `Authorization` header, or an empty one.
  case unsigned
  /// Not a compact JWT, or one without the claims LiveKit always writes (`iss`, `exp`).
  case malformedToken(String)
  /// The token names an API key we do not have (`iss`).
  case unknownAPIKey(String)
  /// The header names an algorithm other than HS256.
  case unsupportedAlgorithm(String)
  case badSignature
  case expired
  case notYetValid
  /// A valid token without the `sha256` claim that binds it to a body.
  case missingBodyHash
  /// A valid token for another body (or a `sha256` claim that is not base64).
  case bodyHashMismatch
  case malformedBody(String)
  case replayed(id: String)

  package var description: String {
    switch self {
    case .badContentType(let type?): return "webhook content type is \"\(type)\", not application/webhook+json"
    case .badContentType(nil): return "webhook has no content type (LiveKit sends application/webhook+json)"
    case .unsigned: return "webhook is unsigned: no Authorization header"
    case .malformedToken(let reason): return "webhook token is malformed: \(reason)"
    case .unknownAPIKey(let key): return "webhook token is signed with an unknown API key \"\(key)\""
    case .unsupportedAlgorithm(let alg): return "webhook token uses \"\(alg)\", not HS256"
    case .badSignature: return "webhook token signature does not verify (wrong secret or altered token)"
    case .expired: return "webhook token has expired"
    case .notYetValid: return "webhook token is not valid yet"
    case .missingBodyHash: return "webhook token has no sha256 claim"
    case .bodyHashMismatch: return "webhook body does not match the token's sha256 claim"
    case .malformedBody(let reason): return "webhook body is not a LiveKit event: \(reason)"
    case .replayed(let id): return "webhook event \(id) was already received"
    }
  }
}
