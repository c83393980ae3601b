/// What a WebSocket upgrade request carried: enough to authenticate before the first message.
public struct UpgradeRequest: Sendable {
  public var path: String
  public var query: [String: String]
  public var headers: HTTPHeaders
  public var remoteAddress: String

  public init(
    path: String, query: [String: String] = [:], headers: HTTPHeaders = HTTPHeaders(), remoteAddress: String = ""
  ) {
    self.path = path
    self.query = query
    self.headers = headers
    self.remoteAddress = remoteAddress
  }

  public var bearerToken: String? {
    HTTPRequest(method: .GET, path: path, headers: headers).bearerToken
  }
}

/// WebSocket close codes this module itself uses.
public enum WebSocketCloseCode {
  public static let normal: UInt16 = 1000
  public static let goingAway: UInt16 = 1001
  public static let unsupportedData: UInt16 = 1003
  public static let messageTooBig: UInt16 = 1009
  /// Dialtone's "over a limit" (protocol.md 14): here, a reader too slow for what is sent to it.
  public static let tooSlow: UInt16 = 4429

  /// Whether a peer may send `code` in a close frame (RFC 6455 §7.4): the codes defined for use
  /// (1000–1003, 1007–1011), those IANA registered since (1012–1014), and 3000–4999 for
  /// libraries and applications. 1005, 1006 and 1015 only report what happened locally.
  static func isValidFromPeer(_ code: UInt16) -> Bool {
    switch code {
    case 1000...1003, 1007...1014, 3000...4999: return true
    default: return false
    }
  }
}

/// Receives server-side WebSocket events. Every method is called on the network thread, in order per
/// connection: implementations must return quickly and hand work to their own executor.
public protocol WebSocketHandler: Sendable {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest)
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool)
  /// `code` is the peer's close code when it sent one; nil when the socket just went away.
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?)
}

/// A handle to one WebSocket, usable from any thread. Sends are queued and written by the network
/// thread in order; after close they are dropped.
public final class WebSocketConnection: Sendable, Hashable, CustomStringConvertible {
  public let id: UInt64
  public let remoteAddress: String
  private let loop: ServiceLoop
  /// The server socket it writes to while that is open: a send made on the network thread goes
  /// to it without looking the id up. Set and cleared by `ServerRole`, read by `ServiceLoop`,
  /// both on the network thread only (the socket holds this handle too: cleared when it closes).
  nonisolated(unsafe) var socket: ServerWebSocket?

  init(id: UInt64, remoteAddress: String, loop: ServiceLoop) {
    self.id = id
    self.remoteAddress = remoteAddress
    self.loop = loop
  }

  public func send(text: String) { loop.post(.send(id, Array(text.utf8), binary: false)) }
  public func send(text bytes: [UInt8]) { loop.send(bytes, coalesced: false, on: self) }
  public func send(binary bytes: [UInt8]) { loop.post(.send(id, bytes, binary: true)) }
  /// Like `send(text:)`, but the message may wait up to the server's `coalescingDelay` for the
  /// next message to this socket and leave in the same write: one syscall and one TCP segment
  /// instead of two. Order is kept: a later `send` writes the waiting message first.
  public func sendCoalesced(text bytes: [UInt8]) { loop.send(bytes, coalesced: true, on: self) }

  /// Closes after everything queued before it has been written.
  public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
    loop.post(.close(id, code, reason))
  }

  public static func == (lhs: WebSocketConnection, rhs: WebSocketConnection) -> Bool { lhs === rhs }
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
  public var description: String { "ws#\(id)" }
}
