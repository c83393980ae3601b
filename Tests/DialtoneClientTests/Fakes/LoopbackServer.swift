import DialtoneAuth
import DialtoneClient
import DialtoneClientLinux
import DialtoneNet
import DialtoneServer
import DialtoneSupport
import Foundation

/// A real `DialtoneServer` on a loopback port, with its own data directory, and a libwebsockets
/// client for the SDK's transport.
final class LoopbackServer: Sendable {
  let server: DialtoneServer
  let network: WebSocketClient
  let directory: String
  let secret: String

  init(
    secret: String, resumeWindow: Double = 60, configure: (inout ServerConfiguration) -> Void = { _ in }
  ) async throws {
    self.secret = secret
    directory = NSTemporaryDirectory() + "dialtone-client-\(UUID().uuidString)"
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.dataDirectory = directory
    configuration.authSecret = secret
    configuration.logLevel = .error
    configuration.drainSeconds = 1
    configuration.resumeWindow = resumeWindow
    configure(&configuration)
    server = try await DialtoneServer(configuration: configuration)
    network = try WebSocketClient()
  }

  var webSocketURL: String { "ws://127.0.0.1:\(server.port)/v1/ws" }

  func token(_ user: String, device: String) throws -> String {
    try DevelopmentTokens.mint(secret: Array(secret.utf8), user: user, device: device, name: nil, ttl: 3600)
  }

  func stop() async {
    await server.stop()
    await network.shutdown()
    try? FileManager.default.removeItem(atPath: directory)
  }
}
