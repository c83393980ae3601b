import DialtoneCommandLine
import DialtoneSupport
import Foundation

/// A `dialtone-bench signaling-idle` child holding one target's idle sockets. Its stdin is a pipe
/// from this process: when this process ends, however it ends, the child sees the end and exits.
final class IdleHolder {
  private let child: ChildProcess
  private let input = Pipe()
  private let output = Pipe()
  private let printed = Locked("")

  /// `seconds`: the child's own time limit, in case nothing else stops it.
  init(_ target: BenchSignalingCommand.StartedTarget, count: Int, seconds: Double) throws {
    let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    var arguments = ["signaling-idle", "--url", target.url, "--count", "\(count)", "--seconds", "\(Int(seconds))"]
    if let secret = target.secret { arguments += ["--secret", secret] }
    child = try ChildProcess(me, arguments, input: input, output: output)
    let reader = output.fileHandleForReading
    let printed = self.printed
    Thread {
      while true {
        let data = reader.availableData
        if data.isEmpty { return }
        printed.withLock { $0 += String(decoding: data, as: UTF8.self) }
      }
    }.start()
  }

  /// Waits (bounded) for the child's `ready` line; throws if it exits or takes longer.
  func waitUntilReady(timeout: Double) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while !printed.withLock({ $0.contains("ready") }) {
      guard child.process.isRunning else {
        throw ArgumentError(message: "the idle sockets' process exited (\(child.process.terminationStatus))")
      }
      guard Date() < deadline else {
        throw ArgumentError(message: "the idle sockets were not ready in \(Int(timeout)) s")
      }
      try await Task.sleep(for: .milliseconds(50))
    }
  }

  func stop() {
    try? input.fileHandleForWriting.close()
    child.terminate()
  }
}
