import DialtoneCommandLine
import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// `dialtone-bench ws-echo --port N`: a WebSocket echo endpoint on the server's own stack
/// (`WebServer`, the server's limits), for the Autobahn test cases (scripts/autobahn.py). The
/// product server speaks the signaling protocol, not echo, so the conformance run needs this.
enum BenchWebSocketEchoCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let port = try arguments.int("port", default: 9001)
    // The server's limit by default; the full run (Autobahn's 9.* sends up to 16 MiB) raises it.
    let maxMessageBytes = try arguments.int("max-message-bytes", default: Limits.maxMessageBytes)
    // A harness that dies without stopping it must not leave it running for ever.
    let lifetime = try arguments.int("seconds", default: 900)
    guard (0...65535).contains(port), (1...(64 << 20)).contains(maxMessageBytes), (1...86_400).contains(lifetime)
    else {
      throw ArgumentError(message: "--port must be 0...65535, --max-message-bytes 1...67108864, --seconds 1...86400")
    }
    var configuration = WebServerConfiguration(
      host: "127.0.0.1", port: port, webSocketPath: arguments.string("path") ?? "/v1/ws",
      maxMessageBytes: maxMessageBytes)
    // An echo holds what it receives until the reader takes it: the bound must fit one message.
    configuration.maxQueuedBytes = max(configuration.maxQueuedBytes, 2 * maxMessageBytes)
    let server = try WebServer(configuration: configuration, router: Router(), webSocketHandler: EchoHandler())
    // Unbuffered: the harness reads the port from this line while the process runs.
    FileHandle.standardOutput.write(
      Data("ws-echo listening on ws://127.0.0.1:\(server.port)\(configuration.webSocketPath)\n".utf8))
    let stop = Locked<CheckedContinuation<Void, Never>?>(nil)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      stop.withLock { $0 = continuation }
      // Signals may be reported more than once (see ProcessSignals): resume only the first time.
      let resume: @Sendable () -> Void = { stop.withLock { $0.take() }?.resume() }
      ProcessSignals.onTermination { _ in resume() }
      DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(lifetime), execute: resume)
    }
    await server.stop()
    return 0
  }
}

/// Sends every message back as it came (text as text, binary as binary).
private struct EchoHandler: WebSocketHandler {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}

  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    if isText { connection.send(text: message) } else { connection.send(binary: message) }
  }

  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}
