import DialtoneCommandLine
import DialtoneNet
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// `dialtone-bench signaling-idle`: holds N idle authenticated sockets to one relay, for
/// `signaling --interleave`, whose two targets' idle sockets would not fit in one process's
/// descriptors (20,000 here). Prints `ready N` once all are connected, then holds them until its
/// stdin closes (the parent ended, however it ended) or `--seconds` pass.
enum BenchSignalingIdleCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let url = try arguments.required("url")
    let count = try arguments.int("count", default: 10_000)
    let seconds = try arguments.double("seconds", default: 600)
    guard count >= 0, seconds > 0 else { throw ArgumentError(message: "--count and --seconds must be positive") }
    let dialect: any SignalingDialect =
      arguments.string("secret").map { DialtoneDialect(url: url, secret: Array($0.utf8)) } ?? NodeRelayDialect(url: url)
    ResourceLimits.raiseOpenFiles()
    exitWhenInputCloses()
    let client = try WebSocketClient(maxMessageBytes: 1 << 16, pingIntervalSeconds: 3600, idleTimeoutSeconds: 7200)
    do {
      let idle = try await BenchSignalingCommand.connectIdle(
        count, dialects: [dialect], client: client, stats: LoadStats())
      // Unbuffered: the parent waits for this line on a pipe.
      FileHandle.standardOutput.write(Data("ready \(idle.count)\n".utf8))
      try await Task.sleep(for: .seconds(seconds))
      await client.shutdown()
      return 0
    } catch {
      await client.shutdown()
      throw error
    }
  }

  /// Ends this process as soon as its stdin reaches its end: the parent closed the pipe or died.
  /// `_exit`, not `exit`: the sockets need no goodbye, and exit-time cleanup under the client's
  /// running network thread once crashed (BenchSignalingCommand.drive).
  private static func exitWhenInputCloses() {
    let watcher = Thread {
      var buffer = [UInt8](repeating: 0, count: 256)
      while true {
        let count = read(0, &buffer, buffer.count)
        if count == 0 || (count < 0 && errno != EINTR) { _exit(0) }
      }
    }
    watcher.start()
  }
}
