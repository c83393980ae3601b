import DialtoneNet
import Foundation
import Synchronization
import Testing

/// Records, for each message, whether the handler ran where the executor says its jobs run.
private final class IsolationProbe: WebSocketHandler {
  let executor: NetworkExecutor
  let seen = Mutex<[Bool]>([])
  init(executor: NetworkExecutor) { self.executor = executor }
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    let current = executor.isCurrent
    seen.withLock { $0.append(current) }
    connection.send(text: Array("seen".utf8))
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}

private actor OnNetworkThread {
  nonisolated let executor: NetworkExecutor
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  init(_ executor: NetworkExecutor) { self.executor = executor }
  func isCurrent() -> Bool { executor.isCurrent }
  func note(_ value: Int, in log: Notes) { log.add(value, executor.isCurrent) }
}

/// Numbers noted, each with whether the executor said it was current.
private final class Notes: Sendable {
  private let seen = Mutex<[(Int, Bool)]>([])
  func add(_ value: Int, _ current: Bool) { seen.withLock { $0.append((value, current)) } }
  var all: [(Int, Bool)] { seen.withLock { $0 } }
}

/// Posts `count` actions from this (non-network) thread, every tenth followed by an actor call
/// (a job) that notes its own number negated: everything is noted in posting order, each where
/// the executor's jobs run.
private func postInterleaved(_ count: Int, from start: Int, on actor: OnNetworkThread, into log: Notes) async -> [Int] {
  let executor = actor.executor
  var expected: [Int] = []
  for value in start..<(start + count) {
    executor.post { log.add(value, executor.isCurrent) }
    expected.append(value)
    if value.isMultiple(of: 10) {
      await actor.note(-value, in: log)
      expected.append(-value)
    }
  }
  _ = await actor.isCurrent()  // a job after every action posted: they have all run
  return expected
}

struct NetworkExecutorTests {
  @Test func isCurrentOnlyOnTheThreadRunningItsJobs() async throws {
    let executor = NetworkExecutor()
    #expect(!executor.isCurrent)
    let probe = IsolationProbe(executor: executor)
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: Router(), webSocketHandler: probe, executor: executor)
    let actor = OnNetworkThread(executor)
    #expect(await actor.isCurrent())
    let peer = try RawWebSocket.handshake(port: server.port)
    peer.sendText("hello")
    #expect(peer.receiveFrames().map(\.payload) == ["seen"])
    peer.close()
    #expect(probe.seen.withLock { $0 } == [true])
    #expect(!executor.isCurrent)
    await server.stop()
    // Stopped: jobs run on the fallback queue, and isCurrent follows them there.
    #expect(await actor.isCurrent())
    #expect(!executor.isCurrent)
  }

  /// `post` runs an action where the executor's jobs run, in order with them: before the loop
  /// starts (the fallback queue), on the network thread, and after it stops.
  @Test func postedActionsRunInOrderWithJobsWhereTheJobsRun() async throws {
    let executor = NetworkExecutor()
    let actor = OnNetworkThread(executor)
    let log = Notes()
    var expected = await postInterleaved(30, from: 0, on: actor, into: log)
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: Router(),
      webSocketHandler: IsolationProbe(executor: executor), executor: executor)
    expected += await postInterleaved(200, from: 1000, on: actor, into: log)
    await server.stop()
    expected += await postInterleaved(30, from: 5000, on: actor, into: log)
    let seen = log.all
    #expect(seen.map(\.0) == expected)
    #expect(seen.filter { !$0.1 }.isEmpty)
    #expect(!executor.isCurrent)
  }
}
