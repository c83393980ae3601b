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
}
