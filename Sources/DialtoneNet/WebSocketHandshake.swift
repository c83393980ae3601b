import DialtoneCrypto

/// The server's side of the opening handshake (RFC 6455 §4.2): which requests are WebSocket
/// upgrades, whether one is acceptable, and the 101 that accepts it.
package enum WebSocketHandshake {
  /// The one subprotocol this server speaks: a client that names others and not it is refused.
  static let subprotocol = "dialtone"

  /// A request that asks for a WebSocket (`Upgrade: websocket`), well-formed or not.
  static func isUpgrade(_ head: HTTPRequestHead) -> Bool {
    head.lists("upgrade", "websocket")
  }

  /// The 101 response accepting `head`, or the error refusing it.
  package static func accept(_ head: HTTPRequestHead) -> Result<[UInt8], HTTPError> {
    guard head.method == .GET, head.minorVersion >= 1 else {
      return .failure(.badRequest("a WebSocket upgrade is a GET over HTTP/1.1"))
    }
    guard head.lists("connection", "upgrade") else {
      return .failure(.badRequest("a WebSocket upgrade needs Connection: Upgrade"))
    }
    guard head.field("host") != nil else { return .failure(.badRequest("a WebSocket upgrade needs Host")) }
    guard head.field("sec-websocket-version")?.trimmingHTTPWhitespace == "13" else {
      return .failure(
        HTTPError(
          status: 426, code: "upgrade-required", message: "only WebSocket version 13 is supported",
          headers: [HTTPHeaderField("sec-websocket-version", "13")]))
    }
    guard head.count(of: "sec-websocket-key") == 1, let key = head.field("sec-websocket-key"),
      Base64.decode(key)?.count == 16
    else {
      return .failure(.badRequest("Sec-WebSocket-Key must be 16 bytes in base64"))
    }
    var response =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      + "Sec-WebSocket-Accept: \(acceptValue(key: key))\r\n"
    if head.field("sec-websocket-protocol") != nil {
      guard head.lists("sec-websocket-protocol", subprotocol) else {
        return .failure(.badRequest("no supported subprotocol (this server speaks \"\(subprotocol)\")"))
      }
      response += "Sec-WebSocket-Protocol: \(subprotocol)\r\n"
    }
    return .success(Array((response + "\r\n").utf8))
  }

  /// base64(SHA-1(key + the protocol's GUID)) (RFC 6455 §1.3).
  static func acceptValue(key: String) -> String {
    Base64.encode(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
  }
}
