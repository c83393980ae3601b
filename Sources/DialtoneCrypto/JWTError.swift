public enum JWTError: Error, Sendable, Hashable, CustomStringConvertible {
  /// Not three base64url segments of JSON objects, or a header we cannot honour.
  case malformed
  /// The header names an algorithm other than the one this verifier is pinned to.
  case unsupportedAlgorithm(String)
  case badSignature
  case expired
  /// `nbf` or `iat` lies in the future beyond the leeway.
  case notYetValid
  case missingClaim(String)
  /// A claim is present but has the wrong JSON type (e.g. a string `exp`).
  case invalidClaim(String)
  case invalidKey(String)
  /// Signing could not produce a token (claims not encodable, or an OpenSSL failure).
  case signingFailed(String)

  public var description: String {
    switch self {
    case .malformed: return "malformed token"
    case .unsupportedAlgorithm(let alg): return "unsupported or unexpected algorithm \"\(alg)\""
    case .badSignature: return "signature does not verify"
    case .expired: return "token has expired"
    case .notYetValid: return "token is not valid yet"
    case .missingClaim(let name): return "required claim \"\(name)\" is missing"
    case .invalidClaim(let name): return "claim \"\(name)\" has the wrong type"
    case .invalidKey(let reason): return "invalid key: \(reason)"
    case .signingFailed(let reason): return "signing failed: \(reason)"
    }
  }
}
