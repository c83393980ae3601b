import DialtoneSupport
import Foundation

public struct WebServerConfiguration: Sendable {
  public var host: String
  public var port: Int
  public var webSocketPath: String
  /// Larger WebSocket messages close the socket with 1009.
  public var maxMessageBytes: Int
  /// Larger HTTP bodies get 413.
  public var maxBodyBytes: Int
  /// A WebSocket idle this long gets a ping; one silent for `idleTimeoutSeconds` is dropped.
  public var pingIntervalSeconds: Int
  public var idleTimeoutSeconds: Int
  /// How long shutdown waits for sockets to close after sending 1001.
  public var drainSeconds: Double
  /// How often idle sockets are checked; keepalive times are rounded to multiples of it.
  public var keepaliveSweepSeconds: Double = 5
  /// The longest request head (request line and header fields, line endings included); a
  /// longer one is answered 431 and its connection closed.
  public var maxHeaderBytes: Int = 16 * 1024
  /// The longest a `sendCoalesced` message waits for another message to share its write; 0 sends
  /// it at once.
  public var coalescingDelay: Double = 0
  /// Bytes that may wait for one WebSocket's reader before the socket is closed with
  /// `WebSocketCloseCode.tooSlow`.
  public var maxQueuedBytes = 2 << 20
  /// Serve TLS (`https://`, `wss://`) with these files instead of plain HTTP.
  public var tls: TLSFiles?

  public init(
    host: String = "127.0.0.1", port: Int = 8080, webSocketPath: String = "/v1/ws",
    maxMessageBytes: Int = 64 * 1024, maxBodyBytes: Int = 1 << 20, pingIntervalSeconds: Int = 25,
    idleTimeoutSeconds: Int = 75, drainSeconds: Double = 5
  ) {
    self.host = host
    self.port = port
    self.webSocketPath = webSocketPath
    self.maxMessageBytes = maxMessageBytes
    self.maxBodyBytes = maxBodyBytes
    self.pingIntervalSeconds = pingIntervalSeconds
    self.idleTimeoutSeconds = idleTimeoutSeconds
    self.drainSeconds = drainSeconds
  }

  /// Keepalive for clients that send something at least every `heartbeatSeconds` (Dialtone's
  /// protocol, §5.6): a socket silent for twice that and 10 s is dropped, and the server pings
  /// one only once it is silent past the heartbeat and two sweeps (a sweep sees silence up to a
  /// sweep late, and the client's own message may be a moment on its way). A client keeping its
  /// heartbeat so never gets a server ping: pinged at the heartbeat, its socket often carried two
  /// round trips per interval, the server's ping racing the client's own. One that does not ping
  /// is kept open by its pongs. The sweep's period is set with them: the ping's margin is its.
  public mutating func keepAlive(heartbeatSeconds: Int, sweepSeconds: Double = 5) {
    keepaliveSweepSeconds = sweepSeconds
    idleTimeoutSeconds = max(1, heartbeatSeconds) * 2 + 10
    let margin = Int((2 * sweepSeconds).rounded(.up))
    pingIntervalSeconds = max(1, min(heartbeatSeconds + margin, idleTimeoutSeconds - margin))
  }
}

/// An HTTP/1.1 + WebSocket server, served by one network thread: libwebsockets' libuv loop runs
/// the sockets (and TLS); the HTTP/1.1 and WebSocket protocols are DialtoneNet's own.
public final class WebServer: Sendable {
  public let configuration: WebServerConfiguration
  /// The bound port: the kernel's choice when configured with port 0.
  public let port: Int
  private let loop: ServiceLoop

  /// With an `executor`, actors bound to it run on this server's network thread. `log` receives
  /// what an operator should see (running out of file descriptors).
  public init(
    configuration: WebServerConfiguration, router: Router, webSocketHandler: any WebSocketHandler,
    executor: NetworkExecutor? = nil, log: @escaping NetLogger = { _, _ in }
  ) throws {
    signal(SIGPIPE, SIG_IGN)
    self.configuration = configuration
    try configuration.tls?.checkReadable()
    let role = ServerRole(configuration: configuration, router: router, webSocketHandler: webSocketHandler)
    loop = try ServiceLoop(
      role: role,
      maxMessageBytes: configuration.maxMessageBytes,
      pingIntervalSeconds: configuration.pingIntervalSeconds,
      idleTimeoutSeconds: configuration.idleTimeoutSeconds,
      sweepSeconds: configuration.keepaliveSweepSeconds)
    let loop = self.loop
    let listener = try Listener(host: configuration.host, port: configuration.port, log: log) { sockets in
      if !loop.post(.adopt(sockets)) { for socket in sockets { close(socket) } }
    }
    role.listener = listener
    port = listener.port
    loop.executor = executor
    loop.start(name: "dialtone-net")
  }

  /// Stops accepting, closes every WebSocket with 1001, lets in-flight HTTP responses finish, and
  /// stops the loop when all are closed or `drainSeconds` have passed. Callable from any thread.
  public func shutdown() {
    loop.post(.shutdown(drainSeconds: configuration.drainSeconds))
  }

  public func waitUntilStopped() async {
    let loop = self.loop
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      _ = WorkerThread(name: "dialtone-net-stop") {
        loop.waitUntilStopped()
        continuation.resume()
      }
    }
  }

  public func stop() async {
    shutdown()
    await waitUntilStopped()
  }
}
