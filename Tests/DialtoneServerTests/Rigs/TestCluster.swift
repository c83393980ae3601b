import DialtoneCluster
import DialtoneProtocol
import DialtoneRedis
import DialtoneStorage
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Three nodes on one PostgreSQL database and one Redis (`--database-url`, `--redis-url`), each a
/// real server with its own port: devices connect to whichever node, as behind a balancer.
struct TestCluster {
  let nodes: [TestServer]
  let redis: ScratchRedis
  /// The Redis database of this cluster's own (1...15, in turn): the nodes of a test that failed
  /// before stopping them cannot disturb the next test's.
  let database: Int
  private static let lastDatabase = Locked(0)

  /// `liveCalls`: a node's own live-call store, in place of the cluster's PostgreSQL journal.
  static func start(
    _ count: Int = 3, liveCalls: [Int: any LiveCallStore] = [:], _ extra: (inout ServerConfiguration) -> Void = { _ in }
  ) async throws -> TestCluster {
    let redis = try SharedRedis.server()
    let database = lastDatabase.withLock {
      $0 = $0 % 15 + 1
      return $0
    }
    try redis.connect(database: database, emptied: true).close()
    let schema = try SharedPostgres.server().freshSchema()
    var nodes: [TestServer] = []
    for index in 1...count {
      nodes.append(
        try await TestServer(
          configure: {
            $0.databaseURL = schema
            $0.redisURL = redis.url + "/\(database)"
            $0.nodeName = "n\(index)"
            extra(&$0)
          }, liveCalls: liveCalls[index - 1]))
    }
    return TestCluster(nodes: nodes, redis: redis, database: database)
  }

  /// Runs `body` with a cluster, and stops it whether the body threw or not.
  static func with(_ count: Int = 3, _ body: (TestCluster) async throws -> Void) async throws {
    try await stopping(try await start(count), stop: { await $0.stop() }, body)
  }

  /// A connection to this cluster's Redis database.
  func connect() throws -> RedisConnection { try redis.connect(database: database) }

  func stop() async {
    for node in nodes { await node.stop() }
  }

  /// Connects on `node` and waits until the whole cluster knows where the device is (a real
  /// client learns nothing of this: a message sent meanwhile reaches it on connecting instead).
  func connect(_ user: String, device: String = "phone", on node: Int) async throws -> SignalingProbe {
    let probe = try await nodes[node].connect(user, device: device)
    try await waitForPresence(user, device, connected: true)
    return probe
  }

  func waitForPresence(_ user: String, _ device: String, connected: Bool) async throws {
    let connection = try connect()
    defer { connection.close() }
    let presence = ClusterPresence(connection, nodeExpiry: .seconds(3))
    let seen = await eventually(within: 10) {
      (try? presence.devices(of: user))?.contains { $0.deviceId == device && $0.connected == connected } == true
    }
    guard seen else { throw ProbeFailure(description: "\(user)/\(device) never showed connected=\(connected)") }
  }

  /// Waits until Redis lists `user` as talking (in a connected call) or not, as a node that
  /// places a call for them sees it.
  func waitForTalking(_ user: String, _ talking: Bool) async throws {
    let connection = try connect()
    defer { connection.close() }
    let seen = await eventually(within: 10) {
      (try? connection.command(["SMEMBERS", .string("dt:user-talking:{\(user)}")]))?.elements?.isEmpty == !talking
    }
    guard seen else { throw ProbeFailure(description: "\(user) never showed talking=\(talking)") }
  }

  func owner(of callId: CallID) throws -> String? {
    let connection = try connect()
    defer { connection.close() }
    return try CallOwnership(connection, leaseDuration: .seconds(10)).owner(of: callId)
  }
}

extension TestCluster {
  private static let answer = SessionDescription(sdp: "v=0\r\no=- 3 4 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n")

  /// `user`'s phone back on node `node` on a new socket, resuming `session` from `lastSeq`: the
  /// socket and what the node answered.
  func resume(_ user: String, _ session: String, from lastSeq: UInt64, on node: Int) async throws -> (
    SignalingProbe, ServerMessage.Welcome
  ) {
    let server = nodes[node]
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await probe.hello(
      token: server.token(user), resume: .init(sessionId: session, lastSeq: lastSeq))
    return (probe, welcome)
  }

  /// Alice on node `aliceNode` calls Bob on node `bobNode`, who answers: both have read the accept.
  func answeredCall(alice aliceNode: Int = 0, bob bobNode: Int = 1) async throws -> (
    SignalingProbe, SignalingProbe, CallID
  ) {
    let alice = try await connect("alice", on: aliceNode)
    let bob = try await connect("bob", on: bobNode)
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(try await bob.act(.accept(.init(callId: call, answer: Self.answer))).isAck)
    _ = try await alice.expect(.accept)
    return (alice, bob, call)
  }
}
