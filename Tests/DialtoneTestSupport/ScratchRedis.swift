import DialtoneRedis
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A throwaway redis-server on 127.0.0.1 (a free port, no persistence, its own directory). Every
/// wait is bounded; `stop` removes everything.
public actor ScratchRedis: ScratchServer {
  public nonisolated let directory: String
  public nonisolated let port: Int
  /// Set: the server speaks TLS only (on `port`), with these certificates.
  public nonisolated let tls: TLS?
  /// Set: the server is a replica of the (plain) server on this port.
  public nonisolated let primaryPort: Int?
  private let binary: String
  private var server: Process?

  private var logPath: String { directory + "/redis.log" }

  /// A TLS-only server: its certificate and key, the CA that clients' certificates must chain to,
  /// and whether a client must show one.
  public struct TLS: Sendable {
    public var certificates: ScratchCertificates
    public var requireClientCertificate: Bool

    public init(_ certificates: ScratchCertificates, requireClientCertificate: Bool = false) {
      self.certificates = certificates
      self.requireClientCertificate = requireClientCertificate
    }
  }

  private init(directory: String, port: Int, tls: TLS?, primaryPort: Int?, binary: String) {
    self.directory = directory
    self.port = port
    self.tls = tls
    self.primaryPort = primaryPort
    self.binary = binary
  }

  /// The server on a free port (another pick if the port was taken meanwhile).
  public static func start() async throws -> ScratchRedis { try await start(tls: nil) }

  /// A plain server replicating `primary` (`--replicaof`); it may still be syncing on return.
  public static func start(replicaOf primary: ScratchRedis) async throws -> ScratchRedis {
    try await start(tls: nil, primaryPort: primary.port)
  }

  public static func start(tls: TLS?) async throws -> ScratchRedis { try await start(tls: tls, primaryPort: nil) }

  private static func start(tls: TLS?, primaryPort: Int?) async throws -> ScratchRedis {
    let binary = try locate()
    let directory = NSTemporaryDirectory() + "dtredis-\(UUID().uuidString.prefix(8).lowercased())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    do {
      return try await ScratchProcess.onFreePort { port in
        let server = ScratchRedis(directory: directory, port: port, tls: tls, primaryPort: primaryPort, binary: binary)
        do {
          try await server.launch()
        } catch {
          if server.log.contains("Address already in use") { throw ScratchProcess.PortTaken(server.log) }
          throw error
        }
        return server
      }
    } catch {
      try? FileManager.default.removeItem(atPath: directory)
      throw error
    }
  }

  /// A fresh replica of `primary` for `body` (it may still be syncing when `body` starts), stopped
  /// afterwards whether `body` threw or not.
  public static func with<T>(
    isolation: isolated (any Actor)? = #isolation, replicaOf primary: ScratchRedis,
    _ body: (ScratchRedis) async throws -> T
  ) async throws -> T {
    try await stopping(try await start(replicaOf: primary), stop: { await $0.stop() }, body)
  }

  /// A fresh TLS-only server for `body`, with certificates of its own (a client certificate it
  /// requires when `requireClientCertificate`); afterwards the server stops and the certificates
  /// go, whether `body` threw or not.
  public static func withTLS<T>(
    isolation: isolated (any Actor)? = #isolation, requireClientCertificate: Bool = false,
    _ body: (ScratchRedis, ScratchCertificates) async throws -> T
  ) async throws -> T {
    let certificates = try ScratchCertificates()
    defer { certificates.remove() }
    let server = try await start(tls: TLS(certificates, requireClientCertificate: requireClientCertificate))
    return try await stopping(server, stop: { await $0.stop() }, { try await body($0, certificates) })
  }

  public nonisolated var url: String {
    guard let tls else { return "redis://127.0.0.1:\(port)" }
    let client =
      tls.requireClientCertificate
      ? "&cert-file=\(tls.certificates.client)&key-file=\(tls.certificates.clientKey)" : ""
    return "rediss://127.0.0.1:\(port)?ca-file=\(tls.certificates.ca)\(client)"
  }

  public nonisolated func connect(commandTimeout: Duration = .seconds(5)) throws -> RedisConnection {
    try RedisConnection(url: url, connectTimeout: .seconds(2), commandTimeout: commandTimeout)
  }

  /// A connection to database `database` (`SELECT`), emptied first when `emptied` (`FLUSHDB`):
  /// a test's own keys on a server its suite shares.
  public nonisolated func connect(database: Int, emptied: Bool = false) throws -> RedisConnection {
    let connection = try connect()
    do {
      try connection.command(["SELECT", .integer(Int64(database))])
      if emptied { try connection.command(["FLUSHDB"]) }
      return connection
    } catch {
      connection.close()
      throw error
    }
  }

  /// SIGKILL, as a crash or the OOM killer would.
  public func kill() async {
    guard let server else { return }
    self.server = nil
    guard server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGKILL)
    _ = await eventually(within: 10) { !server.isRunning }
  }

  /// SIGSTOP: the server keeps its connections but answers nothing (a replica stalled under
  /// load) until `resume`.
  public func pause() {
    guard let server, server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGSTOP)
  }

  public func resume() {
    guard let server, server.isRunning else { return }
    Glibc.kill(server.processIdentifier, SIGCONT)
  }

  /// Starts the server again on the same port (after `kill`).
  public func restart() async throws { try await launch() }

  /// SIGTERM, SIGKILL if it has not exited within 2 s (it keeps nothing to lose); then the
  /// directory goes.
  public func stop() async {
    if let server, server.isRunning {
      server.terminate()
      _ = await eventually(within: 2) { !server.isRunning }
    }
    await kill()
    try? FileManager.default.removeItem(atPath: directory)
  }

  public nonisolated var log: String { (try? String(contentsOfFile: directory + "/redis.log", encoding: .utf8)) ?? "" }

  private var listening: [String] {
    let replicating = primaryPort.map { ["--replicaof", "127.0.0.1", String($0)] } ?? []
    guard let tls else { return ["--port", String(port)] + replicating }
    return [
      "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.certificates.server, "--tls-key-file",
      tls.certificates.serverKey, "--tls-ca-cert-file", tls.certificates.ca, "--tls-auth-clients",
      tls.requireClientCertificate ? "yes" : "no",
    ]
  }

  private func launch() async throws {
    let log = try ScratchProcess.appendingLog(logPath)
    let process = try ScratchProcess.spawn(
      [binary] + listening + [
        "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory, "--daemonize", "no",
        "--logfile", "",
        // With a replica: sync it at once, and stop without waiting for it to catch up.
        "--repl-diskless-sync-delay", "0", "--shutdown-timeout", "0",
      ], in: directory, output: log)
    server = process
    let probeURL = url
    let ready = await eventually(within: 10) {
      guard process.isRunning else { return true }
      let probe = try? RedisConnection(url: probeURL, connectTimeout: .seconds(1), commandTimeout: .seconds(1))
      return (try? probe?.command(["PING"])) == .status("PONG")
    }
    guard ready, process.isRunning else {
      await kill()
      throw ScratchProcess.Failure("redis-server did not start (ready: \(ready)): \(self.log.suffix(2000))")
    }
  }

  /// `DIALTONE_REDIS_SERVER`, else redis-server in /usr/bin or on PATH. Missing is an error with
  /// instructions, never a skip.
  private static func locate() throws -> String {
    if let override = ProcessInfo.processInfo.environment["DIALTONE_REDIS_SERVER"] {
      guard FileManager.default.isExecutableFile(atPath: override) else {
        throw ScratchProcess.Failure("DIALTONE_REDIS_SERVER=\(override) is not executable")
      }
      return override
    }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let candidates = ["/usr/bin"] + path.split(separator: ":").map(String.init)
    if let directory = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/redis-server") }) {
      return directory + "/redis-server"
    }
    throw ScratchProcess.Failure(
      "no redis-server: run scripts/deps.sh (Debian's redis-server) or set DIALTONE_REDIS_SERVER")
  }
}
