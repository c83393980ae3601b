import Foundation

/// What the scratch servers the tests start (PostgreSQL, Redis) have in common: one log file each
/// appended to across restarts, programs run with a clean environment, and a first free port
/// picked again when another process took it between the pick and the bind.
public enum ScratchProcess {
  public struct Failure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
  }

  /// The log at `path`, opened for appending (created when missing).
  public static func appendingLog(_ path: String) throws -> FileHandle {
    if !FileManager.default.fileExists(atPath: path) {
      guard FileManager.default.createFile(atPath: path, contents: nil) else {
        throw Failure("cannot create \(path)")
      }
    }
    let log = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    log.seekToEndOfFile()
    return log
  }

  /// `arguments[0]` with the rest, in `directory`, stdin empty, stdout and stderr to `output`.
  public static func spawn(_ arguments: [String], in directory: String, output: FileHandle) throws -> Process {
    guard let program = arguments.first else { throw Failure("nothing to run") }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = Array(arguments.dropFirst())
    process.currentDirectoryURL = URL(fileURLWithPath: directory)
    process.environment = ["PATH": "/usr/bin:/bin", "LC_ALL": "C"]
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = output
    process.standardError = output
    try process.run()
    return process
  }

  /// What a launch throws when its server could not bind the port it was given.
  public struct PortTaken: Error, CustomStringConvertible {
    public let description: String
    public init(_ log: String) { description = "the port was taken: \(log.suffix(500))" }
  }

  /// `launch(port)` on a free loopback port, up to three picks: another after `PortTaken`.
  public static func onFreePort<Server>(
    isolation: isolated (any Actor)? = #isolation, _ launch: (Int) async throws -> Server
  ) async throws -> Server {
    var lastError: Error = Failure("no start attempted")
    for _ in 0..<3 {
      do {
        return try await launch(try LoopbackListener.freePort())
      } catch let error as PortTaken {
        lastError = error
      }
    }
    throw lastError
  }
}

/// A throwaway server the tests start and stop (`ScratchPostgres`, `ScratchRedis`).
public protocol ScratchServer: Actor {
  static func start() async throws -> Self
  /// Stops it and removes everything it wrote.
  func stop() async
}

extension ScratchServer {
  /// A fresh server for `body`, stopped afterwards whether `body` threw or not.
  public static func with<T>(isolation: isolated (any Actor)? = #isolation, _ body: (Self) async throws -> T)
    async throws -> T
  {
    try await stopping(try await start(), stop: { await $0.stop() }, body)
  }
}
