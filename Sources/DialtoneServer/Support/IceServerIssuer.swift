import DialtoneCrypto
import DialtoneProtocol
import Foundation

/// Builds the ICE server list a user gets: STUN URLs as they are, TURN URLs with coturn's TURN
/// REST credentials (`use-auth-secret`): username `<expiry>:<userId>`, credential
/// base64(HMAC-SHA1(secret, username)).
public struct IceServerIssuer: Sendable {
  public let stunURLs: [String]
  public let turnURLs: [String]
  private let turnSecret: [UInt8]?
  public let ttl: Int

  public init(stunURLs: [String], turnURLs: [String], turnSecret: String?, ttl: Int) {
    self.stunURLs = stunURLs
    self.turnURLs = turnURLs
    self.turnSecret = turnSecret.map { Array($0.utf8) }
    self.ttl = ttl
  }

  public func servers(for userId: String, now: Date) -> [IceServer] {
    var servers: [IceServer] = []
    if !stunURLs.isEmpty { servers.append(IceServer(urls: stunURLs)) }
    if !turnURLs.isEmpty, let turnSecret {
      let expiry = Int64(now.timeIntervalSince1970) + Int64(ttl)
      let username = "\(expiry):\(userId)"
      let credential = Base64.encode(HMAC.sha1(key: turnSecret, message: Array(username.utf8)))
      servers.append(IceServer(urls: turnURLs, username: username, credential: credential))
    }
    return servers
  }
}
