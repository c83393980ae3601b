import DialtoneCommandLine
import DialtoneNet
import DialtoneProtocol
import Foundation

/// `dialtone-bench signaling`: K concurrent 1:1 calls through the server — invite with offer,
/// accept with answer, 20 candidates each way (`--candidates`), hangup, repeat — paced to a total message rate,
/// while N idle authenticated sockets are held. Relay latency is measured per candidate (the
/// sender's timestamp rides in the candidate string). The same load then runs against a minimal
/// Node.js `ws` relay, so the result is a ratio.
enum BenchSignalingCommand {
  struct Options {
    var calls: Int
    var idle: Int
    var rate: Int
    var seconds: Double
    /// Both targets run pinned to this CPU, so that the scheduler moves neither around.
    var serverCPU: Int?
    /// Candidates each side sends per call (`--candidates`, default 20): a call is an invite, an
    /// accept, these and a hangup.
    var candidates = 20

    /// The command that starts a target: as it is, or under `taskset`.
    func command(_ path: String, _ arguments: [String]) -> (String, [String]) {
      guard let serverCPU else { return (path, arguments) }
      return ("/usr/bin/taskset", ["-c", "\(serverCPU)", path] + arguments)
    }
  }

  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let options = Options(
      calls: try arguments.int("calls", default: 100), idle: try arguments.int("idle", default: 10_000),
      rate: try arguments.int("rate", default: 5_000), seconds: try arguments.double("seconds", default: 20),
      serverCPU: arguments.string("server-cpu") == nil ? nil : try arguments.int("server-cpu", default: 0),
      candidates: try arguments.int("candidates", default: 20))
    guard options.candidates >= 0 else { throw ArgumentError(message: "--candidates must not be negative") }
    ResourceLimits.raiseOpenFiles()
    let targets = arguments.strings("target")
    if !targets.isEmpty { return try await runDeployed(options, targets: targets, arguments) }
    if arguments.flag("interleave") { return try await runInterleaved(options, arguments) }
    var rows: [(String, Report)] = []
    if !arguments.flag("node-only") {
      rows.append(
        (
          "dialtone",
          try await runDialtone(
            options, serverBinary: arguments.string("server-binary") ?? siblingBinary("dialtone-server"))
        ))
    }
    if !arguments.flag("dialtone-only") {
      let script = arguments.string("node-relay") ?? "bench/node-relay.js"
      rows.append(("node ws relay", try await runNode(options, script: script)))
    }
    print(
      "bench-signaling: \(options.calls) concurrent calls, \(options.idle) idle sockets, target \(options.rate) msg/s, \(Int(options.seconds)) s"
    )
    print("target".padding(toLength: 15, withPad: " ", startingAt: 0) + Report.header)
    for (name, report) in rows { print(name.padding(toLength: 15, withPad: " ", startingAt: 0) + report.line) }
    if rows.count == 2 {
      let ratio = rows[0].1.cpuMicrosPerMessage / max(rows[1].1.cpuMicrosPerMessage, 0.001)
      print(String(format: "dialtone CPU per relayed message = %.2f × node's", ratio))
    }
    return 0
  }

  // MARK: - Targets

  /// `--interleave`: Dialtone (`--server-binary`) as A against the Node relay, or against another
  /// Dialtone build (`--baseline-binary`) as B.
  private static func runInterleaved(_ options: Options, _ arguments: ArgumentList) async throws -> Int32 {
    let settings = BenchSignalingInterleaved.Settings(
      sliceSeconds: try arguments.double("slice", default: 1),
      warmupPairs: try arguments.int("warmup-pairs", default: 1))
    guard settings.sliceSeconds > 0, settings.warmupPairs >= 0, options.seconds > 0 else {
      throw ArgumentError(message: "--slice and --seconds must be positive, --warmup-pairs not negative")
    }
    let server = arguments.string("server-binary") ?? siblingBinary("dialtone-server")
    typealias Starter = (name: String, start: () async throws -> StartedTarget)
    let a: Starter
    let b: Starter
    if let other = arguments.string("baseline-binary") {
      a = ("A", { try await startDialtone(options, serverBinary: server) })
      b = ("baseline", { try await startDialtone(options, serverBinary: other) })
    } else {
      let script = arguments.string("node-relay") ?? "bench/node-relay.js"
      a = ("dialtone", { try await startDialtone(options, serverBinary: server) })
      b = ("node ws relay", { try await startNode(options, script: script) })
    }
    try await BenchSignalingInterleaved.run(options, settings, starting: [a, b])
    return 0
  }

  /// Servers someone else started (`bench/cluster_bench.py`: a cluster's nodes): each call's
  /// callee is on the node after its caller's, and the CPU of every `--measure-pid` counts.
  private static func runDeployed(_ options: Options, targets: [String], _ arguments: ArgumentList) async throws
    -> Int32
  {
    guard let secret = arguments.string("secret") else {
      throw ArgumentError(message: "--target needs --secret, the servers' --auth-secret")
    }
    func pids(_ name: String) throws -> [Int32] {
      try arguments.strings(name).map {
        guard let pid = Int32($0) else { throw ArgumentError(message: "--\(name) \($0) is not a process id") }
        return pid
      }
    }
    let layout = Layout(
      dialects: targets.map { DialtoneDialect(url: $0, secret: Array(secret.utf8)) }, measured: try pids("measure-pid"),
      breakdown: try pids("breakdown-pid"))
    let report = try await drive(options, layout: layout)
    let label = arguments.string("label") ?? "\(targets.count) node(s)"
    if arguments.flag("json") {
      print(report.json(label: label))
    } else {
      print("target".padding(toLength: 15, withPad: " ", startingAt: 0) + Report.header)
      print(label.padding(toLength: 15, withPad: " ", startingAt: 0) + report.line)
    }
    return 0
  }

  private static func runDialtone(_ options: Options, serverBinary: String) async throws -> Report {
    let target = try await startDialtone(options, serverBinary: serverBinary)
    defer { target.stop() }
    return try await drive(options, dialect: target.dialect, serverPID: target.pid)
  }

  private static func runNode(_ options: Options, script: String) async throws -> Report {
    let target = try await startNode(options, script: script)
    defer { target.stop() }
    return try await drive(options, dialect: target.dialect, serverPID: target.pid)
  }

  /// A relay this command started, listening, and how to speak to it.
  struct StartedTarget {
    let process: ChildProcess
    let url: String
    /// The server's `--auth-secret`: Dialtone's dialect; nil: the Node relay's.
    let secret: String?
    let dataDirectory: String?

    var pid: Int32 { process.pid }
    var dialect: any SignalingDialect {
      guard let secret else { return NodeRelayDialect(url: url) }
      return DialtoneDialect(url: url, secret: Array(secret.utf8))
    }

    func stop() {
      process.terminate()
      if let dataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) }
    }
  }

  static func startDialtone(_ options: Options, serverBinary: String) async throws -> StartedTarget {
    let secret = "bench-" + UUID().uuidString
    let port = try FreePort.pick()
    let dataDirectory = NSTemporaryDirectory() + "dialtone-bench-\(UUID().uuidString)"
    let (path, serverArguments) = options.command(
      serverBinary,
      [
        "--port", "\(port)", "--auth-secret", secret, "--data-dir", dataDirectory,
        "--log-level", "error",
        // Every socket comes from one address, and the load is the point: no limits in the way.
        "--max-connections-per-ip", "0", "--messages-per-second", "0", "--invites-per-minute", "0",
      ])
    let target = StartedTarget(
      process: try ChildProcess(path, serverArguments), url: "ws://127.0.0.1:\(port)/v1/ws", secret: secret,
      dataDirectory: dataDirectory)
    return try await listening(target, port: port)
  }

  static func startNode(_ options: Options, script: String) async throws -> StartedTarget {
    let port = try FreePort.pick()
    let (path, nodeArguments) = options.command("/usr/bin/env", ["node", script, "\(port)"])
    let target = StartedTarget(
      process: try ChildProcess(path, nodeArguments), url: "ws://127.0.0.1:\(port)/", secret: nil, dataDirectory: nil)
    return try await listening(target, port: port)
  }

  /// `target` once it accepts connections; stopped if it never does.
  private static func listening(_ target: StartedTarget, port: Int) async throws -> StartedTarget {
    do {
      try await waitForPort(port)
      return target
    } catch {
      target.stop()
      throw error
    }
  }

  static func waitForPort(_ port: Int) async throws {
    for _ in 0..<300 {
      if let socket = try? TCPProbe.connect(port: port) {
        socket.close()
        return
      }
      try await Task.sleep(for: .milliseconds(50))
    }
    throw ArgumentError(message: "server did not start on port \(port)")
  }

  // MARK: - Load

  private static func drive(_ options: Options, dialect: any SignalingDialect, serverPID: Int32) async throws -> Report
  {
    try await drive(options, layout: Layout(dialects: [dialect], measured: [serverPID]))
  }

  /// Where the load's sockets go and whose CPU counts: with several dialects (a cluster's
  /// nodes), idle sockets are spread over them and each call's callee is on the node after its
  /// caller's, so every relayed message crosses nodes.
  struct Layout {
    var dialects: [any SignalingDialect]
    var measured: [Int32]
    /// A part of `measured` also reported on its own (a cluster's Redis).
    var breakdown: [Int32] = []
  }

  static func drive(_ options: Options, layout: Layout) async throws -> Report {
    let client = try WebSocketClient(maxMessageBytes: 1 << 16, pingIntervalSeconds: 3600, idleTimeoutSeconds: 7200)
    // Its network thread stops before this returns: a process that exits with it still running
    // (it was a task nobody awaited) runs OpenSSL's exit-time cleanup under that thread's calls
    // into lws and OpenSSL, which crashed once in `pthread_rwlock_unlock` (docs/benchmarks.md).
    do {
      let report = try await measure(options, layout: layout, client: client)
      await client.shutdown()
      return report
    } catch {
      await client.shutdown()
      throw error
    }
  }

  private static func measure(_ options: Options, layout: Layout, client: WebSocketClient) async throws -> Report {
    let dialects = layout.dialects
    let stats = LoadStats()

    let idle = try await connectIdle(options.idle, dialects: dialects, client: client, stats: stats)

    let pairs = try (0..<options.calls).map {
      try CallPair(
        index: $0, dialect: dialects[$0 % dialects.count], calleeDialect: dialects[($0 + 1) % dialects.count],
        candidates: options.candidates, client: client, stats: stats)
    }
    try await stats.waitForReady(options.idle + 2 * options.calls, timeout: 60)
    let baseline = try ProcessStats.read(pids: layout.measured)
    let breakdownBaseline = try ProcessStats.read(pids: layout.breakdown)
    let eachBaseline = try layout.breakdown.map { try ProcessStats.read(pid: $0) }
    // The load generator's own CPU: the two targets' clients do different work (Dialtone's
    // decodes every frame and acks), and under a CPU hog that difference competes too.
    let clientBaseline = try ProcessStats.read(pid: getpid())
    stats.startMeasuring()

    let elapsed = try await pace(pairs, rate: options.rate, seconds: options.seconds)
    try await Task.sleep(for: .milliseconds(500))  // let the last messages land
    let loaded = try ProcessStats.read(pids: layout.measured)
    let breakdownLoaded = try ProcessStats.read(pids: layout.breakdown)
    let eachLoaded = try layout.breakdown.map { try ProcessStats.read(pid: $0) }
    let clientLoaded = try ProcessStats.read(pid: getpid())
    stats.stopMeasuring()
    for connection in idle { connection.close() }
    for pair in pairs { pair.close() }
    // Closing is asynchronous: the next target's 10,000 sockets must not find this one's still
    // holding descriptors (the soft limit is 20,000 here).
    await ProcessStats.waitForOpenDescriptors(below: 1_000, seconds: 30)

    let percentile = stats.latencyPercentiles()
    let relayed = stats.relayedMessages
    return Report(
      messagesPerSecond: Double(relayed) / elapsed, callsPerSecond: Double(stats.completedCalls) / elapsed,
      p50: percentile(0.5), p99: percentile(0.99), p999: percentile(0.999),
      rssMB: Double(loaded.rssBytes) / 1_048_576,
      cpuPercent: (loaded.cpuSeconds - baseline.cpuSeconds) / elapsed * 100,
      cpuMicrosPerMessage: relayed > 0 ? (loaded.cpuSeconds - baseline.cpuSeconds) / Double(relayed) * 1_000_000 : .nan,
      clientMicrosPerMessage: relayed > 0
        ? (clientLoaded.cpuSeconds - clientBaseline.cpuSeconds) / Double(relayed) * 1_000_000 : .nan,
      systemMicrosPerMessage: relayed > 0
        ? (loaded.systemSeconds - baseline.systemSeconds) / Double(relayed) * 1_000_000 : .nan,
      breakdownMicrosPerMessage: relayed > 0 && !layout.breakdown.isEmpty
        ? (breakdownLoaded.cpuSeconds - breakdownBaseline.cpuSeconds) / Double(relayed) * 1_000_000 : nil,
      breakdownEachMicrosPerMessage: relayed > 0
        ? zip(eachBaseline, eachLoaded).map { ($1.cpuSeconds - $0.cpuSeconds) / Double(relayed) * 1_000_000 } : [])
  }

  /// `count` idle authenticated sockets, spread over `dialects`, connected in batches of 500.
  static func connectIdle(
    _ count: Int, dialects: [any SignalingDialect], client: WebSocketClient, stats: LoadStats
  ) async throws -> [WebSocketClientConnection] {
    var idle: [WebSocketClientConnection] = []
    var index = 0
    while index < count {
      let end = min(index + 500, count)
      for n in index..<end {
        idle.append(try dialects[n % dialects.count].connect(client, user: "idle\(n)", stats: stats) { _, _ in })
      }
      try await stats.waitForReady(end, timeout: 60)
      index = end
    }
    return idle
  }

  /// Sends `rate` messages a second over `pairs` for `seconds`; returns the time it took. Every
  /// 2 ms it sends what the rate says is due, round-robin over the calls.
  static func pace(_ pairs: [CallPair], rate: Int, seconds: Double) async throws -> Double {
    let start = Date()
    var sent = 0
    var turn = 0
    while Date().timeIntervalSince(start) < seconds {
      let due = Int(Date().timeIntervalSince(start) * Double(rate)) - sent
      var budget = due
      var idleRounds = 0
      while budget > 0 && idleRounds < pairs.count {
        if pairs[turn % pairs.count].step() {
          budget -= 1
          sent += 1
          idleRounds = 0
        } else {
          idleRounds += 1
        }
        turn += 1
      }
      try await Task.sleep(for: .milliseconds(2))
    }
    return Date().timeIntervalSince(start)
  }

  struct Report {
    var messagesPerSecond: Double
    var callsPerSecond: Double
    var p50: Double
    var p99: Double
    var p999: Double
    var rssMB: Double
    var cpuPercent: Double
    var cpuMicrosPerMessage: Double
    var clientMicrosPerMessage: Double
    /// The kernel's part of `cpuMicrosPerMessage`.
    var systemMicrosPerMessage: Double
    /// `Layout.breakdown`'s part of `cpuMicrosPerMessage`.
    var breakdownMicrosPerMessage: Double? = nil
    /// Each `Layout.breakdown` process's part on its own, in their order (a Redis Cluster's shards).
    var breakdownEachMicrosPerMessage: [Double] = []

    /// One JSON object per report, for a script that puts several runs in one table.
    func json(label: String) -> String {
      func number(_ value: Double) -> String { value.isFinite ? String(format: "%.3f", value) : "null" }
      let fields: [(String, String)] = [
        ("label", "\"\(label)\""), ("relayedPerSecond", number(messagesPerSecond)),
        ("callsPerSecond", number(callsPerSecond)), ("p50Ms", number(p50)), ("p99Ms", number(p99)),
        ("p999Ms", number(p999)), ("cpuPercent", number(cpuPercent)),
        ("cpuMicrosPerMessage", number(cpuMicrosPerMessage)),
        ("breakdownMicrosPerMessage", breakdownMicrosPerMessage.map(number) ?? "null"),
        ("breakdownEachMicrosPerMessage", "[" + breakdownEachMicrosPerMessage.map(number).joined(separator: ",") + "]"),
        ("clientMicrosPerMessage", number(clientMicrosPerMessage)),
      ]
      return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    static let header =
      "relayed msg/s  calls/s  p50 ms  p99 ms  p99.9 ms  RSS MB  CPU %  CPU µs/msg  (of it sys)  client µs/msg"
    var line: String {
      String(
        format: "%13.0f  %7.1f  %6.3f  %6.3f  %8.3f  %6.1f  %5.1f  %10.1f  %11.1f  %13.1f",
        messagesPerSecond, callsPerSecond, p50, p99, p999, rssMB, cpuPercent, cpuMicrosPerMessage,
        systemMicrosPerMessage, clientMicrosPerMessage)
    }
  }
}
