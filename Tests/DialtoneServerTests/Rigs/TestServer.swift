import DialtoneAuth
import DialtoneCrypto
import DialtoneJSON
import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneSessions
@testable import DialtoneStorage

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

let testSecret = "test-secret-0123456789abcdef"

/// A real server on a loopback port with a virtual clock (or, `realTime`, the system's: its
/// timers then run on its network loop) and a throwaway data directory.
final class TestServer: Sendable {
  let server: DialtoneServer
  let clock: ManualClock
  let dataDirectory: String
  let client: WebSocketClient

  init(
    configure: (inout ServerConfiguration) -> Void = { _ in }, dataDirectory: String? = nil,
    liveCalls: (any LiveCallStore)? = nil, remoteDevices: any RemoteDevices = NoRemoteDevices(),
    placement: any CallPlacement = LocalCalls(), sessionStore: (any SessionStore)? = nil, realTime: Bool = false
  ) async throws {
    clock = ManualClock()
    let directory = dataDirectory ?? NSTemporaryDirectory() + "dialtone-test-\(UUID().uuidString)"
    self.dataDirectory = directory
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.dataDirectory = directory
    configuration.authSecret = testSecret
    configuration.logLevel = ProcessInfo.processInfo.environment["DIALTONE_TEST_LOG"] == nil ? .error : .debug
    configuration.drainSeconds = 2
    configure(&configuration)
    server = try await DialtoneServer(
      configuration: configuration, clock: realTime ? SystemClock() : clock, store: nil, liveCalls: liveCalls,
      remoteDevices: remoteDevices,
      placement: placement, sessionStore: sessionStore)
    client = try WebSocketClient()
  }

  var webSocketURL: String { "ws://127.0.0.1:\(server.port)/v1/ws" }
  var baseURL: String { "http://127.0.0.1:\(server.port)" }

  func token(_ user: String, device: String = "phone", name: String? = nil, ttl: TimeInterval = 3600, now: Date? = nil)
    -> String
  {
    (try? DevelopmentTokens.mint(
      secret: Array(testSecret.utf8), user: user, device: device, name: name, ttl: ttl,
      now: now ?? clock.now)) ?? ""
  }

  /// A connected, welcomed client for `user`/`device`.
  func connect(_ user: String, device: String = "phone", name: String? = nil) async throws -> SignalingProbe {
    let probe = try SignalingProbe(client: client, url: webSocketURL)
    try await probe.hello(token: token(user, device: device, name: name))
    return probe
  }

  func stop() async {
    await server.stop()
    await client.shutdown()
    try? FileManager.default.removeItem(atPath: dataDirectory)
  }

  /// Runs `body`, then stops the server and waits for it, whether `body` threw or not. A stop
  /// left to a task nobody awaits (`defer { Task { … } }`) runs into the next test, where lws's
  /// context teardown, which closes its event descriptor twice (scripts/run-tests.sh), can close a
  /// socket the next test just opened.
  func stopping<T>(after body: () async throws -> T) async throws -> T {
    do {
      let result = try await body()
      await stop()
      return result
    } catch {
      await stop()
      throw error
    }
  }

  func http(_ method: String, _ path: String, token: String? = nil, body: String? = nil) async throws -> (
    status: Int, json: JSONValue?
  ) {
    var request = URLRequest(url: URL(string: baseURL + path)!)
    request.httpMethod = method
    if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
    if let body { request.httpBody = Data(body.utf8) }
    let (data, response) = try await URLSession.shared.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, JSONValue(parsing: Array(data)))
  }
}
