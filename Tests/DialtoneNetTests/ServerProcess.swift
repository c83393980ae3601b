import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The real `dialtone-server` binary in a child process, for tests that change process-wide state
/// (the descriptor limit) which must not leak into the test runner.
final class ServerProcess {
  let process = Process()
  let port: Int
  let logPath: String
  private let dataDirectory: String

  var pid: Int32 { process.processIdentifier }

  init() throws {
    let scratch = NSTemporaryDirectory() + "dialtone-net-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    dataDirectory = scratch
    logPath = scratch + "/server.log"
    guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
      throw TimeoutError(what: "creating \(logPath)")
    }
    let binary = Self.binaryDirectory + "/dialtone-server"
    guard FileManager.default.isExecutableFile(atPath: binary) else {
      throw TimeoutError(what: "\(binary) (build it with `swift build --build-tests`)")
    }
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = [
      "--host", "127.0.0.1", "--port", "0", "--data-dir", scratch + "/data",
      "--auth-secret", "net-test-secret-0123456789", "--log-level", "info",
    ]
    let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
    process.standardOutput = log
    process.standardError = log
    try process.run()
    port = try Self.waitForPort(logPath: logPath, process: process)
  }

  var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

  /// Open descriptors of the server process.
  var openDescriptors: Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
  }

  /// Lowers (or raises) the server's RLIMIT_NOFILE, soft and hard, with util-linux's prlimit(1):
  /// Glibc's prlimit() is a GNU extension Swift does not import.
  func setDescriptorLimit(_ limit: Int) throws {
    let tool = Process()
    tool.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
    tool.arguments = ["--pid", String(pid), "--nofile=\(limit):\(limit)"]
    try tool.run()
    tool.waitUntilExit()
    guard tool.terminationStatus == 0 else { throw TimeoutError(what: "prlimit exited \(tool.terminationStatus)") }
  }

  /// User + system CPU time the server has used, in seconds (/proc/PID/stat fields 14 and 15).
  var cpuSeconds: Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
  }

  /// SIGTERM, then SIGKILL if it has not exited within a few seconds.
  func stop() {
    if process.isRunning { process.terminate() }
    for _ in 0..<100 where process.isRunning { usleep(50_000) }
    if process.isRunning { kill(pid, SIGKILL) }
    process.waitUntilExit()
    try? FileManager.default.removeItem(atPath: dataDirectory)
  }

  /// `DIALTONE_BIN`, or this package's debug build folder.
  private static var binaryDirectory: String {
    if let bin = ProcessInfo.processInfo.environment["DIALTONE_BIN"] { return bin }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug").path
  }

  /// The port from the server's "listening on http://127.0.0.1:PORT" line.
  private static func waitForPort(logPath: String, process: Process) throws -> Int {
    let marker = "listening on http://127.0.0.1:"
    for _ in 0..<600 {
      let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
      if let range = text.range(of: marker) {
        let digits = text[range.upperBound...].prefix { $0.isNumber }
        if let port = Int(digits) { return port }
      }
      guard process.isRunning else { throw TimeoutError(what: "server start (it exited): \(text)") }
      usleep(50_000)
    }
    throw TimeoutError(what: "server start")
  }
}
