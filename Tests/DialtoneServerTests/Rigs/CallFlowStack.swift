import DialtoneCluster
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Where the call-flow suite runs: one server with its embedded defaults, or a cluster of three
/// nodes on one PostgreSQL and one Redis, where each user's devices sit on other nodes than the
/// users they call (issue 19: the whole call-flow suite against a cluster).
enum Deployment: String, CaseIterable, CustomTestStringConvertible, Sendable {
  case single
  case cluster

  var testDescription: String { rawValue }
}

/// The servers of a `Deployment`, as the call-flow tests use them: a device connects to its own
/// node, and time moves on every node's clock at once.
struct CallFlowStack {
  let deployment: Deployment
  let servers: [TestServer]
  let cluster: TestCluster?

  static func start(_ deployment: Deployment) async throws -> CallFlowStack {
    switch deployment {
    case .single:
      return CallFlowStack(deployment: deployment, servers: [try await TestServer()], cluster: nil)
    case .cluster:
      let cluster = try await TestCluster.start()
      return CallFlowStack(deployment: deployment, servers: cluster.nodes, cluster: cluster)
    }
  }

  /// The node a device connects to: Alice, Bob's phone, and Bob's laptop and Carol each on a
  /// node of their own; anyone else by name.
  func server(for user: String, device: String = "phone") -> TestServer {
    guard servers.count > 1 else { return servers[0] }
    switch (user, device) {
    case ("alice", _): return servers[0]
    case ("bob", "phone"): return servers[1]
    case ("bob", _), ("carol", _): return servers[2]
    default: return servers[abs(user.utf8.reduce(0) { $0 &+ Int($1) }) % servers.count]
    }
  }

  /// A welcomed client; in a cluster, once every node knows where the device is.
  func connect(_ user: String, device: String = "phone", name: String? = nil) async throws -> SignalingProbe {
    let probe = try await server(for: user, device: device).connect(user, device: device, name: name)
    try await cluster?.waitForPresence(user, device, connected: true)
    return probe
  }

  /// A socket to the device's node, not yet welcomed.
  func socket(for user: String, device: String = "phone") throws -> SignalingProbe {
    let node = server(for: user, device: device)
    return try SignalingProbe(client: node.client, url: node.webSocketURL)
  }

  func token(_ user: String, device: String = "phone") -> String {
    server(for: user, device: device).token(user, device: device)
  }

  func advance(by seconds: Double) {
    for server in servers { server.clock.advance(by: seconds) }
  }

  /// Waits until some node has a timer due in `seconds` (the call's node runs its timers).
  func waitForTimer(dueIn seconds: Double) async -> Bool {
    for _ in 0..<1000 {
      if servers.contains(where: { $0.clock.hasTimer(dueIn: seconds) }) { return true }
      try? await Task.sleep(for: .milliseconds(5))
    }
    return false
  }

  func waitUntilOffline(_ user: String, _ device: String) async throws {
    try await server(for: user, device: device).waitUntilOffline(user, device)
    try await cluster?.waitForPresence(user, device, connected: false)
  }

  func stop() async {
    for server in servers { await server.stop() }
  }

  /// Runs `body` on a stack of the deployment, and stops it whether the body threw or not.
  static func with(_ deployment: Deployment, _ body: (CallFlowStack) async throws -> Void) async throws {
    try await stopping(try await start(deployment), stop: { await $0.stop() }, body)
  }
}
