import DialtoneProtocol
import Foundation

/// Translates the WebRTC ICE-server list (`stun:`/`turn:`/`turns:` URLs with a username and
/// credential) into webrtcbin's forms: one `stun://host:port` and any number of
/// `turn(s)://user:pass@host:port?transport=...`, with user and password percent-encoded
/// (TURN REST usernames contain ':' and base64 passwords '/', '+', '=').
public struct IceServerURIs: Sendable, Equatable {
  public var stun: String?
  public var turn: [String]

  public init(_ servers: [IceServer]) {
    var stun: String?
    var turn: [String] = []
    for server in servers {
      for url in server.urls {
        if url.hasPrefix("stun:") {
          let rest = Self.dropSlashes(url.dropFirst("stun:".count))
          if stun == nil, !rest.isEmpty { stun = "stun://" + Self.hostPort(rest, defaultPort: 3478) }
        } else if url.hasPrefix("turn:") || url.hasPrefix("turns:") {
          let secure = url.hasPrefix("turns:")
          let rest = Self.dropSlashes(url.dropFirst(secure ? 6 : 5))
          guard let user = server.username, let password = server.credential, !rest.isEmpty else { continue }
          let parts = rest.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
          guard let host = parts.first, !host.isEmpty else { continue }
          let address = Self.hostPort(host, defaultPort: secure ? 5349 : 3478)
          let query = parts.count > 1 ? "?" + parts[1] : ""
          turn.append("\(secure ? "turns" : "turn")://\(Self.escape(user)):\(Self.escape(password))@\(address)\(query)")
        }
      }
    }
    self.stun = stun
    self.turn = turn
  }

  private static func dropSlashes(_ s: Substring) -> Substring {
    s.hasPrefix("//") ? s.dropFirst(2) : s
  }

  private static func hostPort(_ s: Substring, defaultPort: Int) -> String {
    let text = String(s)
    if text.hasPrefix("[") { return text.contains("]:") ? text : "\(text):\(defaultPort)" }
    return text.contains(":") ? text : "\(text):\(defaultPort)"
  }

  private static func escape(_ s: String) -> String {
    let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
  }
}
