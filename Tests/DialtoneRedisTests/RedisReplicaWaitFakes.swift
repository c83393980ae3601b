import DialtoneRedis
import DialtoneSupport
import DialtoneTestSupport
import Foundation

/// A fake primary whose replicas the test sets, as one server (`.single`: they are counted from
/// `INFO replication`) or as a one-shard Redis Cluster serving every slot (`.cluster`: the slot
/// map lists them). Each WAIT answers the next of `script` (all the replicas asked for once it
/// runs out) and is logged.
final class FakeReplicas: Sendable {
  struct State {
    var replicas: Int
    /// A cluster's view of its replicas ("fail": the map leaves them out).
    var replicaHealth = "online"
    /// One server's `INFO replication` role, and whether it refuses INFO.
    var role = "master"
    var refuseInfo = false
    var script: [Int64]
    var waits: [Int] = []
    /// How often the client counted the replicas (read the slot map, or INFO).
    var counts = 0
  }
  typealias Hook = @Sendable (inout State) -> Void
  let target: ReplicaWaitTarget
  let state: Locked<State>
  private let hook: Locked<Hook?>
  private let server: FakeRedisServer

  /// Runs after each WAIT is answered (a change of the replicas meanwhile).
  var afterWait: Hook? {
    get { hook.current }
    set { hook.withLock { $0 = newValue } }
  }
  var waits: [Int] { state.current.waits }
  var replicaCounts: Int { state.current.counts }

  init(_ target: ReplicaWaitTarget, replicas: Int, waits: [Int64]) throws {
    let state = Locked(State(replicas: replicas, script: waits))
    let hook = Locked<Hook?>(nil)
    let port = Locked<Int64>(0)
    self.target = target
    self.state = state
    self.hook = hook
    server = try FakeRedisServer { command in
      Self.answer(command, target, state, hook, port: port.current)
    }
    port.withLock { [server] in $0 = Int64(server.port) }
  }

  func stop() { server.stop() }
  func set(replicas: Int) { state.withLock { $0.replicas = replicas } }
  func forgetWaits() { state.withLock { $0.waits = [] } }

  func connect(
    replicas: Int = 1, clock: any DialtoneClock = SystemClock(), observer: RedisReplicaObserver? = nil
  ) throws -> any RedisClient {
    let scheme = target == .cluster ? "redis-cluster" : "redis"
    var configuration = try RedisConfiguration(url: "\(scheme)://127.0.0.1:\(server.port)")
    configuration.replicaWait = RedisReplicaWait(
      replicas: replicas, timeout: .milliseconds(10), attempts: 2, observer: observer)
    switch target {
    case .cluster:
      return try RedisClusterConnection(configuration, failoverWait: .milliseconds(100), clock: clock) { _ in }
    case .single:
      return try RedisConnection(configuration, clock: clock)
    }
  }

  private static func text(_ string: String) -> RedisReply { .bulk(Array(string.utf8)) }

  private static func answer(
    _ command: [String], _ target: ReplicaWaitTarget, _ state: Locked<State>, _ hook: Locked<Hook?>, port: Int64
  ) -> RedisReply {
    let name = command.first?.uppercased() ?? ""
    let argument = command.dropFirst().first ?? ""
    switch (name, argument.uppercased()) {
    case ("WAIT", _):
      let asked = Int(argument) ?? -1
      let after = hook.current
      return state.withLock { state in
        state.waits.append(asked)
        let answer = state.script.isEmpty ? Int64(asked) : state.script.removeFirst()
        after?(&state)
        return .integer(answer)
      }
    case ("INFO", _) where target == .single:
      let now = counted(state)
      if now.refuseInfo { return .error(prefix: "NOPERM", message: "this user has no permissions to run 'info'") }
      let replicas = (0..<now.replicas).map {
        "slave\($0):ip=127.0.0.1,port=\(7001 + $0),state=online,offset=1,lag=0\r\n"
      }
      return text("# Replication\r\nrole:\(now.role)\r\nconnected_slaves:\(now.replicas)\r\n" + replicas.joined())
    case ("CLUSTER", "SLOTS") where target == .cluster:
      let now = counted(state)
      // CLUSTER SLOTS leaves failed replicas out.
      let listed = now.replicaHealth == "fail" ? 0 : now.replicas
      let replicas = (0..<listed).map { RedisReply.array([text("127.0.0.1"), .integer(port + 1 + Int64($0))]) }
      return .array([.array([.integer(0), .integer(16383), .array([text("127.0.0.1"), .integer(port)])] + replicas)])
    case ("CLUSTER", "SHARDS") where target == .cluster:
      let now = state.current
      func node(_ port: Int64, _ role: String, _ health: String) -> RedisReply {
        .array([
          text("port"), .integer(port), text("ip"), text("127.0.0.1"), text("endpoint"), text("127.0.0.1"),
          text("role"), text(role), text("health"), text(health),
        ])
      }
      let nodes =
        [node(port, "master", "online")]
        + (0..<now.replicas).map { node(port + 1 + Int64($0), "replica", now.replicaHealth) }
      return .array([
        .array([text("slots"), .array([.integer(0), .integer(16383)]), text("nodes"), .array(nodes)])
      ])
    case ("GET", _): return text("v")
    case ("EXEC", _): return .array([.status("OK"), .status("OK")])
    case ("PING", _): return .status("PONG")
    default: return .status("OK")
    }
  }

  private static func counted(_ state: Locked<State>) -> State {
    state.withLock { state in
      state.counts += 1
      return state
    }
  }
}
