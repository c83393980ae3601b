import DialtoneSupport
import Foundation

public enum WebSocketClientEvent: Sendable, Equatable {
  case opened
  case message([UInt8], isText: Bool)
  /// The socket closed after opening; `code` is the peer's close code if it sent one.
  case closed(code: UInt16?)
  /// The connection never opened (refused, TLS failure, HTTP error on upgrade).
  case failed(String)
}

/// WebSocket client connections on one lws network thread. One instance can hold many
/// connections (the load generator opens thousands); a softphone needs one.
public final class WebSocketClient: Sendable {
  private let loop: ServiceLoop

  public convenience init(
    maxMessageBytes: Int = 1 << 20, pingIntervalSeconds: Int = 25, idleTimeoutSeconds: Int = 75,
    keepaliveSweepSeconds: Double = 5
  ) throws {
    try self.init(
      maxMessageBytes: maxMessageBytes, pingIntervalSeconds: pingIntervalSeconds,
      idleTimeoutSeconds: idleTimeoutSeconds,
      keepaliveSweepSeconds: keepaliveSweepSeconds, lwsTimeoutSeconds: 20)
  }

  /// `lwsTimeoutSeconds`: lws's own bound on a pending connect or handshake (`ServiceLoop`).
  init(
    maxMessageBytes: Int, pingIntervalSeconds: Int, idleTimeoutSeconds: Int, keepaliveSweepSeconds: Double,
    lwsTimeoutSeconds: UInt32
  ) throws {
    signal(SIGPIPE, SIG_IGN)
    loop = try ServiceLoop(
      role: ClientRole(), maxMessageBytes: maxMessageBytes, pingIntervalSeconds: pingIntervalSeconds,
      idleTimeoutSeconds: idleTimeoutSeconds, sweepSeconds: keepaliveSweepSeconds, lwsTimeoutSeconds: lwsTimeoutSeconds)
    loop.start(name: "dialtone-ws-client")
  }

  /// Starts connecting to a `ws://` or `wss://` URL. `onEvent` is called on the network thread, in
  /// order; it must return quickly. Messages sent before `.opened` are queued.
  public func connect(
    to url: String, headers: [HTTPHeaderField] = [], allowSelfSignedCertificates: Bool = false,
    onEvent: @escaping @Sendable (WebSocketClientEvent) -> Void
  ) throws(NetError) -> WebSocketClientConnection {
    try connect(to: url, headers: headers, allowSelfSignedCertificates: allowSelfSignedCertificates) { event, _ in
      onEvent(event)
    }
  }

  /// As above, with the connection handed to every event (so a handler can reply on it).
  public func connect(
    to url: String, headers: [HTTPHeaderField] = [], allowSelfSignedCertificates: Bool = false,
    onEvent: @escaping @Sendable (WebSocketClientEvent, WebSocketClientConnection) -> Void
  )
    throws(NetError) -> WebSocketClientConnection
  {
    guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
      scheme == "ws" || scheme == "wss", let host = components.host, !host.isEmpty
    else {
      throw .invalidURL(url)
    }
    let tls = scheme == "wss"
    var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    if let query = components.percentEncodedQuery { path += "?" + query }
    let id = ClientRole.reserveClientID()
    let connection = WebSocketClientConnection(id: id, loop: loop)
    let request = ClientConnectRequest(
      id: id, host: host, port: components.port ?? (tls ? 443 : 80), path: path,
      useTLS: tls, allowSelfSigned: allowSelfSignedCertificates,
      headers: headers, onEvent: { event in onEvent(event, connection) })
    loop.post(.connect(request))
    return connection
  }

  /// Closes every connection (1001) and stops the network thread.
  public func shutdown() async {
    loop.post(.shutdown(drainSeconds: 2))
    let loop = self.loop
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      _ = WorkerThread(name: "dialtone-net-stop") {
        loop.waitUntilStopped()
        continuation.resume()
      }
    }
  }
}

public final class WebSocketClientConnection: Sendable, CustomStringConvertible {
  public let id: UInt64
  private let loop: ServiceLoop

  init(id: UInt64, loop: ServiceLoop) {
    self.id = id
    self.loop = loop
  }

  public func send(text: String) { loop.post(.send(id, Array(text.utf8), binary: false)) }
  public func send(text bytes: [UInt8]) { loop.post(.send(id, bytes, binary: false)) }
  public func send(binary bytes: [UInt8]) { loop.post(.send(id, bytes, binary: true)) }
  public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "") {
    loop.post(.close(id, code, reason))
  }
  public var description: String { "ws-client#\(id)" }
}
