import DialtonePostgres
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A throwaway PostgreSQL server: a fresh cluster in a temporary directory, listening on
/// 127.0.0.1 (a free port, trust authentication) and on a socket inside that directory. Every
/// wait is bounded; `stop` removes everything.
public actor ScratchPostgres: ScratchServer {
  /// The superuser initdb creates.
  public static let user = "dialtone"

  public nonisolated let directory: String
  public nonisolated let port: Int
  private let binaries: PostgresBinaries
  private var server: Process?

  private var dataDirectory: String { directory + "/data" }
  private var logPath: String { directory + "/postgres.log" }

  private init(directory: String, port: Int, binaries: PostgresBinaries) {
    self.directory = directory
    self.port = port
    self.binaries = binaries
  }

  /// initdb, then the server on a free port (another pick if the port was taken meanwhile).
  public static func start() async throws -> ScratchPostgres {
    let binaries = try PostgresBinaries.locate()
    let suffix = UUID().uuidString.prefix(8).lowercased()
    // Short: the socket path (directory + "/.s.PGSQL.PORT") must fit in 107 bytes.
    let directory = NSTemporaryDirectory() + "dtpg-\(suffix)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    do {
      try own(directory, binaries)
      try await initialize(directory, binaries)
      return try await ScratchProcess.onFreePort { port in
        let server = ScratchPostgres(directory: directory, port: port, binaries: binaries)
        do {
          try await server.launch()
        } catch {
          let log = server.log
          if log.contains("could not bind") || log.contains("already in use") { throw ScratchProcess.PortTaken(log) }
          throw error
        }
        return server
      }
    } catch {
      try? FileManager.default.removeItem(atPath: directory)
      throw error
    }
  }

  /// A URL for database `postgres`; `schema` (created by `freshSchema`) becomes the search path.
  public nonisolated func url(schema: String? = nil, applicationName: String? = nil) -> String {
    var options: [String] = []
    if let schema { options.append("options=-csearch_path%3D\(schema)") }
    if let applicationName { options.append("application_name=\(applicationName)") }
    let query = options.isEmpty ? "" : "?" + options.joined(separator: "&")
    return "postgres://\(Self.user)@127.0.0.1:\(port)/postgres\(query)"
  }

  /// A new empty schema, so that tests sharing the server never see each other's tables; returns
  /// the URL that uses it.
  public nonisolated func freshSchema(applicationName: String? = nil) throws -> String {
    let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    let admin = try PostgresConnection(url: url())
    try admin.execute("CREATE SCHEMA \(schema)")
    return url(schema: schema, applicationName: applicationName)
  }

  /// Turns TLS on (no restart: PostgreSQL reloads its certificate): `certificate` and `key` are
  /// PEM files, copied into the cluster for its owner. Plain connections keep working.
  public func enableTLS(certificate: String, key: String) async throws {
    for (source, name) in [(certificate, "server.crt"), (key, "server.key")] {
      let target = dataDirectory + "/" + name
      try? FileManager.default.removeItem(atPath: target)
      try FileManager.default.copyItem(atPath: source, toPath: target)
      guard chmod(target, 0o600) == 0 else { throw ScratchProcess.Failure("chmod \(target): errno \(errno)") }
      try Self.own(target, binaries)
    }
    let admin = try PostgresConnection(url: url())
    defer { admin.close() }
    try admin.execute("ALTER SYSTEM SET ssl = on")
    try admin.execute("SELECT pg_reload_conf()")
    let ready = await eventually(within: 10) {
      (try? PostgresConnection(url: self.url() + "?sslmode=require").close()) != nil
    }
    guard ready else { throw ScratchProcess.Failure("TLS did not come up: \(log.suffix(2000))") }
  }

  /// SIGKILL for the server and all its processes at once, as a crash or the OOM killer would.
  public func kill() async {
    guard let server else { return }
    self.server = nil
    // An exited server's pid may already belong to another process.
    guard server.isRunning else { return }
    let pid = server.processIdentifier
    // Stopped first, so that it forks nothing between listing its children and their deaths.
    Glibc.kill(pid, SIGSTOP)
    let children = Self.children(of: pid)
    for child in children { Glibc.kill(child, SIGKILL) }
    Glibc.kill(pid, SIGKILL)
    _ = await eventually(within: 10) { !server.isRunning && children.allSatisfy(Self.isGone) }
  }

  /// Starts the server again on the same port and data (after `kill`: crash recovery).
  public func restart() async throws { try await launch() }

  /// Fast shutdown (SIGINT: PostgreSQL's SIGTERM would wait for every client to leave), SIGKILL
  /// if it has not exited within 10 s; then the directory goes.
  public func stop() async {
    if let server, server.isRunning {
      server.interrupt()
      _ = await eventually(within: 10) { !server.isRunning }
    }
    await kill()
    try? FileManager.default.removeItem(atPath: directory)
  }

  public nonisolated var log: String {
    (try? String(contentsOfFile: directory + "/postgres.log", encoding: .utf8)) ?? ""
  }

  private func launch() async throws {
    let log = try ScratchProcess.appendingLog(logPath)
    let process = try ScratchProcess.spawn(
      binaries.launcher + [
        binaries.path("postgres"), "-D", dataDirectory, "-h", "127.0.0.1", "-p", String(port), "-k", directory,
        // A scratch cluster: durability buys nothing here, speed does.
        "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
        "-c", "shared_buffers=16MB", "-c", "max_connections=60",
      ], in: directory, output: log)
    server = process
    let ready = await eventually(within: 15) {
      guard process.isRunning else { return true }
      let probe = [binaries.path("pg_isready"), "-q", "-h", "127.0.0.1", "-p", String(port), "-t", "2"]
      return (try? await Self.run(probe, in: directory, timeout: 5)) == 0
    }
    guard ready, process.isRunning else {
      await kill()
      throw ScratchProcess.Failure("postgres did not start (ready: \(ready)): \(self.log.suffix(2000))")
    }
  }

  private static func initialize(_ directory: String, _ binaries: PostgresBinaries) async throws {
    let data = directory + "/data"
    let status = try await run(
      binaries.launcher + [
        binaries.path("initdb"), "-D", data, "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
        "--no-instructions",
      ], in: directory, timeout: 60, outputPath: directory + "/initdb.log")
    guard status == 0 else {
      let output = (try? String(contentsOfFile: directory + "/initdb.log", encoding: .utf8)) ?? ""
      throw ScratchProcess.Failure("initdb exited \(status): \(output)")
    }
    // Only this machine, and no password: a scratch server.
    let hba = "local all all trust\nhost all all 127.0.0.1/32 trust\n"
    try hba.write(toFile: data + "/pg_hba.conf", atomically: false, encoding: .utf8)
    try own(data + "/pg_hba.conf", binaries)
  }

  private static func own(_ path: String, _ binaries: PostgresBinaries) throws {
    guard let owner = binaries.owner else { return }
    guard chown(path, owner.uid, owner.gid) == 0 else { throw ScratchProcess.Failure("chown \(path): errno \(errno)") }
  }

  /// Runs a program to its end (SIGKILL after `timeout` seconds); returns its exit status.
  private static func run(_ arguments: [String], in directory: String, timeout: Double, outputPath: String? = nil)
    async throws -> Int32
  {
    let output: FileHandle
    if let outputPath {
      guard FileManager.default.createFile(atPath: outputPath, contents: nil) else {
        throw ScratchProcess.Failure("cannot create \(outputPath)")
      }
      output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
    } else {
      output = FileHandle.nullDevice
    }
    let process = try ScratchProcess.spawn(arguments, in: directory, output: output)
    guard await eventually(within: timeout, { !process.isRunning }) else {
      Glibc.kill(process.processIdentifier, SIGKILL)
      _ = await eventually(within: 5) { !process.isRunning }
      throw ScratchProcess.Failure("\(arguments.joined(separator: " ")) did not finish within \(timeout) s")
    }
    return process.terminationStatus
  }

  /// The processes whose parent is `pid` (/proc/N/stat's fourth field).
  private static func children(of pid: Int32) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { Int32($0) }.filter { candidate in
      guard let stat = try? String(contentsOfFile: "/proc/\(candidate)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
      else { return false }
      let fields = stat[stat.index(after: close)...].split(separator: " ")
      return fields.count > 1 && Int32(fields[1]) == pid
    }
  }

  /// Exited: no /proc entry, or a zombie nobody reaped yet (its sockets are closed either way).
  private static func isGone(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = stat.lastIndex(of: ")")
    else { return true }
    return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
  }
}
