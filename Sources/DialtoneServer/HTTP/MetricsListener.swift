import DialtoneNet
import DialtoneSupport

/// `/metrics` on an address of its own (`--metrics-listen`), so that the public port does not
/// expose it: a second HTTP server, on a thread of its own, with that one route.
final class MetricsListener: Sendable {
  private let web: WebServer
  var port: Int { web.port }

  init(host: String, port: Int, route: MetricsRoute, log: Log) throws {
    var router = Router()
    route.register(in: &router)
    web = try WebServer(
      configuration: WebServerConfiguration(host: host, port: port, webSocketPath: "/metrics/no-websocket"),
      router: router, webSocketHandler: NoWebSockets()
    ) { _, message in log.warning(message) }
  }

  func stop() async { await web.stop() }
}

/// The metrics listener takes no WebSocket: one that got through is closed at once.
private struct NoWebSockets: WebSocketHandler {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {
    connection.close(code: 1008, reason: "no WebSockets here")
  }
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {}
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}
