import DialtoneAllocator
import DialtoneNet
import DialtoneServer
import DialtoneSupport
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
  print(ServerConfiguration.usage)
  exit(0)
}

let configuration: ServerConfiguration
do {
  configuration = try ServerConfiguration.parse(arguments: arguments, environment: ProcessInfo.processInfo.environment)
} catch {
  FileHandle.standardError.write(Data("dialtone-server: \(error)\n\n\(ServerConfiguration.usage)".utf8))
  exit(2)
}

// Every signaling socket is a descriptor: use the whole hard limit.
var openFiles = rlimit()
if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &openFiles) == 0 {
  openFiles.rlim_cur = openFiles.rlim_max
  _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &openFiles)
}

let log = Log(level: configuration.logLevel, subsystem: "server", format: configuration.logFormat)
log.info("allocator: \(ServerAllocator.description)")
let server: DialtoneServer
do {
  server = try await DialtoneServer(configuration: configuration)
} catch {
  log.error("cannot start: \(error)")
  exit(1)
}

let stopping = StopOnce()
await withCheckedContinuation { (stopped: CheckedContinuation<Void, Never>) in
  ProcessSignals.onTermination { signal in
    guard stopping.begin() else { return }
    log.info("signal \(signal): draining")
    Task {
      await server.stop()
      stopped.resume()
    }
  }
}
exit(0)

/// Several network loops may report the same signal; only the first starts the drain.
final class StopOnce: Sendable {
  private let started = Locked(false)
  func begin() -> Bool {
    started.withLock { started in
      defer { started = true }
      return !started
    }
  }
}
