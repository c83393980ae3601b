import DialtoneCommandLine
import Foundation

/// `dialtone-bench <benchmark> [options]`: each compares Dialtone with a named peer in the same run.
let benchmarks: [String: (ArgumentList) async throws -> Int32] = [
  "ws": BenchWebSocketsCommand.run,
  "signaling": BenchSignalingCommand.run,
  "push": BenchPushCommand.run,
]

let usage = """
  usage: dialtone-bench <benchmark> [options]

  benchmarks (results and commands in docs/benchmarks.md):
    ws          hold N idle authenticated WebSocket connections and measure them
    signaling   K concurrent calls relayed through the server, against a minimal Node ws relay
    push        VoIP pushes to an APNs mock over one HTTP/2 connection, against aioapns
  """

var arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let benchmark = benchmarks[name] else {
  FileHandle.standardError.write(Data((usage + "\n").utf8))
  exit(arguments.isEmpty || arguments.first == "--help" ? 0 : 2)
}
arguments.removeFirst()
do {
  exit(try await benchmark(ArgumentList(arguments)))
} catch let error as ArgumentError {
  FileHandle.standardError.write(Data("dialtone-bench \(name): \(error.message)\n".utf8))
  exit(2)
} catch {
  FileHandle.standardError.write(Data("dialtone-bench \(name): \(error)\n".utf8))
  exit(1)
}
