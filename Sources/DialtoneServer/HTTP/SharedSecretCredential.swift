import DialtoneCrypto
import DialtoneNet
import Foundation

/// A configured shared secret (the admin dashboard's, the app backend's for the directory):
/// `Authorization: Bearer <token>`, or Basic with the token as the password (what a browser's
/// own prompt sends). Compared as SHA-256 digests in constant time.
struct SharedSecretCredential: Sendable {
  private let digest: [UInt8]
  private let realm: String
  private let challenge: HTTPHeaderField

  init(token: String, realm: String) {
    digest = SHA256.hash(Array(token.utf8))
    self.realm = realm
    challenge = HTTPHeaderField("www-authenticate", "Basic realm=\"\(realm)\", charset=\"UTF-8\"")
  }

  func check(_ request: HTTPRequest) throws(HTTPError) {
    guard let presented = Self.presented(request.headers["authorization"]),
      ConstantTime.equals(SHA256.hash(Array(presented.utf8)), digest)
    else {
      throw HTTPError(
        status: 401, code: "unauthorized", message: "the \(realm) credential is required (Bearer, or Basic's password)",
        headers: [challenge])
    }
  }

  private static func presented(_ header: String?) -> String? {
    guard let header else { return nil }
    let parts = header.split(separator: " ", maxSplits: 1)
    guard parts.count == 2 else { return nil }
    let value = parts[1].trimmingCharacters(in: .whitespaces)
    switch parts[0].lowercased() {
    case "bearer":
      return value
    case "basic":
      guard let data = Data(base64Encoded: value), let pair = String(data: data, encoding: .utf8),
        let colon = pair.firstIndex(of: ":")
      else { return nil }
      return String(pair[pair.index(after: colon)...])
    default:
      return nil
    }
  }
}
