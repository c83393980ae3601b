import DialtoneAuth
import DialtoneCommandLine
import DialtoneNet
import DialtoneSupport
import Foundation

/// `dialtone-bench ws`: starts `dialtone-server` as a child process, opens N authenticated
/// WebSockets (hello → welcome each), then measures the server process: handshake rate, RSS per
/// connection and CPU while every socket sits idle.
///
/// RSS per connection is the growth from N more sockets over a baseline taken with a few
/// warm-up sockets already open (and kept): what the first authenticated socket initialises
/// once for the process (crypto tables, code and data pages first touched, SQLite's cache) is
/// not a per-socket cost, and counted per socket it moved the figure whenever start-up
/// happened to do some of that work or not (a push client made and shut down at start did).
enum BenchWebSocketsCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let count = try arguments.int("connections", default: 15_000)
    let idleSeconds = try arguments.double("idle-seconds", default: 10)
    let batch = try arguments.int("batch", default: 500)
    let warmup = try arguments.int("warmup", default: 200)
    guard count > 0, batch > 0, (0...10_000).contains(warmup) else {
      throw ArgumentError(message: "--connections and --batch must be positive, --warmup 0...10000")
    }
    // Longer than the server's 5 s hello deadline, so those timers are not counted as idle work.
    let settleSeconds = try arguments.double("settle-seconds", default: 8)
    let serverBinary = arguments.string("server-binary") ?? siblingBinary("dialtone-server")
    ResourceLimits.raiseOpenFiles()

    let secret = "bench-secret-" + UUID().uuidString
    let port = try FreePort.pick()
    let dataDirectory = NSTemporaryDirectory() + "dialtone-bench-\(UUID().uuidString)"
    let server = try ChildProcess(
      serverBinary,
      [
        "--port", "\(port)", "--auth-secret", secret,
        "--data-dir", dataDirectory, "--log-level", "warning",
        // One address opens every socket here: the per-address limit is for the real world.
        "--max-connections-per-ip", "0",
      ])
    defer { server.terminate() }
    try await waitForHealth(port: port)
    let started = try ProcessStats.read(pid: server.pid)

    let client = try WebSocketClient(maxMessageBytes: 1 << 16, pingIntervalSeconds: 300, idleTimeoutSeconds: 600)
    let progress = HandshakeCounter()
    let url = "ws://127.0.0.1:\(port)/v1/ws"
    var connections: [WebSocketClientConnection] = []
    connections.reserveCapacity(warmup + count)
    // Sockets 0..<warmup warm the server up; the measured ones follow, with users of their own.
    func open(_ range: Range<Int>) async throws {
      var opened = range.lowerBound
      while opened < range.upperBound {
        let size = min(batch, range.upperBound - opened)
        for index in opened..<(opened + size) {
          let token = try DevelopmentTokens.mint(
            secret: Array(secret.utf8), user: "user\(index / 2)", device: "d\(index % 2)",
            name: nil, ttl: 3600)
          let hello = #"{"type":"hello","id":"h","version":1,"token":"\#(token)"}"#
          let connection = try client.connect(to: url) { event in
            switch event {
            case .message(let bytes, _):
              if String(decoding: bytes, as: UTF8.self).contains(#""type":"welcome""#) { progress.welcomed() }
            case .failed, .closed: progress.failed()
            default: break
            }
          }
          connection.send(text: hello)
          connections.append(connection)
        }
        opened += size
        try await progress.wait(untilSettled: opened, timeout: 60)
      }
    }
    try await open(0..<warmup)
    let baseline = try ProcessStats.read(pid: server.pid)
    let handshakesStarted = Date()
    try await open(warmup..<(warmup + count))
    let handshakeSeconds = Date().timeIntervalSince(handshakesStarted)
    guard progress.failures == 0 else {
      print("bench-ws: \(progress.failures) of \(warmup + count) connections failed")
      return 1
    }

    try await Task.sleep(for: .seconds(settleSeconds))
    let loaded = try ProcessStats.read(pid: server.pid)
    let idleStart = try ProcessStats.read(pid: server.pid)
    try await Task.sleep(for: .seconds(idleSeconds))
    let idleEnd = try ProcessStats.read(pid: server.pid)
    let idleCPU = (idleEnd.cpuSeconds - idleStart.cpuSeconds) / idleSeconds * 100

    let perConnection = Double(loaded.rssBytes - baseline.rssBytes) / Double(count)
    let report: [(String, String)] = [
      ("connections", "\(count)"),
      ("handshakes_per_s", String(format: "%.0f", Double(count) / handshakeSeconds)),
      ("handshake_total_s", String(format: "%.2f", handshakeSeconds)),
      ("warmup_connections", "\(warmup)"),
      ("server_rss_started_mb", String(format: "%.1f", Double(started.rssBytes) / 1_048_576)),
      ("server_rss_baseline_mb", String(format: "%.1f", Double(baseline.rssBytes) / 1_048_576)),
      ("server_rss_loaded_mb", String(format: "%.1f", Double(loaded.rssBytes) / 1_048_576)),
      ("rss_per_connection_kb", String(format: "%.2f", perConnection / 1024)),
      ("idle_cpu_percent", String(format: "%.2f", idleCPU)),
      ("idle_window_s", String(format: "%.0f", idleSeconds)),
    ]
    if arguments.flag("json") {
      print("{" + report.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    } else {
      for (key, value) in report { print("\(key.padding(toLength: 26, withPad: " ", startingAt: 0)) \(value)") }
    }
    for connection in connections { connection.close() }
    await client.shutdown()
    try? FileManager.default.removeItem(atPath: dataDirectory)
    return 0
  }

  private static func waitForHealth(port: Int) async throws {
    for _ in 0..<200 {
      if let socket = try? TCPProbe.connect(port: port) {
        socket.close()
        return
      }
      try await Task.sleep(for: .milliseconds(50))
    }
    throw ArgumentError(message: "dialtone-server did not start on port \(port)")
  }
}

/// Counts welcomes and failures from the network thread; the bench awaits batches.
final class HandshakeCounter: Sendable {
  private struct Counts: Sendable {
    var welcomes = 0
    var failures = 0
  }
  private let counts = Locked(Counts())

  func welcomed() { counts.withLock { $0.welcomes += 1 } }
  func failed() { counts.withLock { $0.failures += 1 } }
  var failures: Int { counts.withLock { $0.failures } }

  func wait(untilSettled target: Int, timeout: Double) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while counts.withLock({ $0.welcomes + $0.failures }) < target {
      guard Date() < deadline else {
        throw ArgumentError(message: "timed out: \(counts.withLock { $0.welcomes }) of \(target) welcomed")
      }
      try await Task.sleep(for: .milliseconds(5))
    }
  }
}
