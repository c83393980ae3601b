/// The algorithms Dialtone signs and verifies (RFC 7518 §3.1 names).
public enum JWTAlgorithm: String, Sendable, Hashable, CaseIterable {
  case hs256 = "HS256"
  case es256 = "ES256"
  case rs256 = "RS256"
}
