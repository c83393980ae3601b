import DialtoneRedis
import DialtoneTestSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A throwaway redis-server on 127.0.0.1 (a free port, no persistence, its own directory). Every
/// wait is bounded; `stop` removes everything.
actor ScratchRedis {
  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  nonisolated let directory: String
  nonisolated let port: Int
  private let binary: String
  private var server: Process?

  private var logPath: String { directory + "/redis.log" }

  private init(directory: String, port: Int, binary: String) {
    self.directory = directory
    self.port = port
    self.binary = binary
  }

  /// The server on a free port (another pick if the port was taken meanwhile).
  static func start() async throws -> ScratchRedis {
    let binary = try locate()
    let directory = NSTemporaryDirectory() + "dtredis-\(UUID().uuidString.prefix(8).lowercased())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var lastError: Error = Failure(description: "no start attempted")
    for _ in 0..<3 {
      let server = ScratchRedis(directory: directory, port: try LoopbackListener.freePort(), binary: binary)
      do {
        try await server.launch()
        return server
      } catch {
        lastError = error
        guard server.log.contains("Address already in use") else { break }
      }
    }
    try? FileManager.default.removeItem(atPath: directory)
    throw lastError
  }

  nonisolated var url: String { "redis://127.0.0.1:\(port)" }

  nonisolated func connect(commandTimeout: Duration = .seconds(5)) throws -> RedisConnection {
    try RedisConnection(url: url, connectTimeout: .seconds(2), commandTimeout: commandTimeout)
  }

  /// SIGKILL, as a crash or the OOM killer would.
  func kill() async {
    guard let server else { return }
    self.server = nil
    guard server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGKILL)
    await Self.wait(seconds: 10) { !server.isRunning }
  }

  /// Starts the server again on the same port (after `kill`).
  func restart() async throws { try await launch() }

  /// SIGTERM, SIGKILL if it has not exited within 2 s (it keeps nothing to lose); then the
  /// directory goes.
  func stop() async {
    if let server, server.isRunning {
      server.terminate()
      await Self.wait(seconds: 2) { !server.isRunning }
    }
    await kill()
    try? FileManager.default.removeItem(atPath: directory)
  }

  nonisolated var log: String { (try? String(contentsOfFile: directory + "/redis.log", encoding: .utf8)) ?? "" }

  private func launch() async throws {
    if !FileManager.default.fileExists(atPath: logPath) {
      guard FileManager.default.createFile(atPath: logPath, contents: nil) else {
        throw Failure(description: "cannot create \(logPath)")
      }
    }
    let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
    log.seekToEndOfFile()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = [
      "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory,
      "--daemonize", "no", "--logfile", "",
    ]
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    process.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C"]
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = log
    process.standardError = log
    try process.run()
    server = process
    let port = port
    let ready = await Self.wait(seconds: 10) {
      guard process.isRunning else { return true }
      let probe = try? RedisConnection(
        RedisConfiguration(port: port, connectTimeout: .seconds(1), commandTimeout: .seconds(1)))
      return (try? probe?.command(["PING"])) == .status("PONG")
    }
    guard ready, process.isRunning else {
      await kill()
      throw Failure(description: "redis-server did not start (ready: \(ready)): \(self.log.suffix(2000))")
    }
  }

  /// `DIALTONE_REDIS_SERVER`, else redis-server in /usr/bin or on PATH. Missing is an error with
  /// instructions, never a skip.
  private static func locate() throws -> String {
    if let override = ProcessInfo.processInfo.environment["DIALTONE_REDIS_SERVER"] {
      guard FileManager.default.isExecutableFile(atPath: override) else {
        throw Failure(description: "DIALTONE_REDIS_SERVER=\(override) is not executable")
      }
      return override
    }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let candidates = ["/usr/bin"] + path.split(separator: ":").map(String.init)
    if let directory = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/redis-server") }) {
      return directory + "/redis-server"
    }
    throw Failure(
      description: "no redis-server: run scripts/deps.sh (Debian's redis-server) or set DIALTONE_REDIS_SERVER")
  }

  /// Polls `condition` every 20 ms for up to `seconds`; whether it held.
  @discardableResult
  static func wait(
    isolation: isolated (any Actor)? = #isolation, seconds: Double, until condition: () async -> Bool
  ) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if await condition() { return true }
      try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
  }
}
