import DialtoneCrypto
import DialtoneJSON
import Foundation

@testable import DialtoneSFU
@testable import DialtoneServer

/// Keys, times and token helpers shared by the LiveKit tests.
enum LiveKitFixture {
  static let credentials = LiveKitCredentials(
    apiKey: "APIdialtoneTest", apiSecret: "lk-test-secret-0123456789abcdefghijklmnop")
  static let otherCredentials = LiveKitCredentials(
    apiKey: "APIotherKey", apiSecret: "lk-other-secret-0123456789abcdefghijklmn")
  /// A whole second, so `nbf` and `exp` are exactly now and now + ttl.
  static let now = Date(timeIntervalSince1970: 1_750_000_000)

  /// The claims of a token, read without checking its signature (the tests check that apart).
  static func payload(_ token: String) -> [String: JSONValue]? {
    segment(token, 1)
  }

  static func header(_ token: String) -> [String: JSONValue]? {
    segment(token, 0)
  }

  private static func segment(_ token: String, _ index: Int) -> [String: JSONValue]? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let bytes = Base64URL.decode(String(parts[index])) else { return nil }
    return JSONValue(parsing: bytes)?.objectValue
  }

  /// A webhook token as LiveKit's server signs one: `iss`, `nbf`, `exp` and `sha256` of `body`.
  static func webhookToken(
    for body: [UInt8], credentials: LiveKitCredentials = credentials, now: Date = now, ttl: TimeInterval = 300,
    sha256: String? = nil, extra: [String: JSONValue] = [:]
  ) throws -> String {
    var claims = JWTClaims(
      issuer: credentials.apiKey, notBefore: now, expiresAt: now.addingTimeInterval(ttl), extra: extra)
    claims["sha256"] = .string(sha256 ?? Base64.encode(SHA256.hash(body)))
    return try JWTSigner.hs256(secret: Array(credentials.apiSecret.utf8)).sign(claims: claims)
  }

  /// A protojson body shaped like LiveKit's, with fields the verifier does not know.
  static func webhookBody(event: String = "participant_joined", id: String = "EV_fixture1") -> [UInt8] {
    Array(
      """
      {
        "event": "\(event)",
        "room": {"sid": "RM_abc", "name": "call-42", "emptyTimeout": 300, "creationTime": "1749999990",
                 "enabledCodecs": [{"mime": "audio/opus"}], "numParticipants": 2},
        "participant": {"sid": "PA_xyz", "identity": "alice#phone", "state": "ACTIVE", "joinedAt": "1749999995",
                        "tracks": [{"sid": "TR_1", "type": "AUDIO", "name": "mic"}], "permission": {"canPublish": true}},
        "track": {"sid": "TR_1", "type": "AUDIO"},
        "id": "\(id)",
        "createdAt": "1750000000",
        "numDropped": 0,
        "someFutureField": {"nested": [1, 2, 3]}
      }
      """.utf8)
  }
}
