import DialtoneCommandLine
import Foundation

/// `dialtone-bench <benchmark> [options]`: each compares Dialtone with a named peer in the same
/// run; results and commands are in docs/benchmarks.md.
private let benchmarks: [Subcommand] = [
  Subcommand(
    "ws", "hold N idle authenticated WebSocket connections and measure them",
    options: [
      .value("connections", "how many sockets (default 15000)"),
      .value("batch", "handshakes in flight at once (default 500)"),
      .value("idle-seconds", "how long to hold them idle (default 10)"),
      .value("settle-seconds", "pause before measuring (default 8)"),
      .value("server-binary", "the dialtone-server to start (default: next to this binary)"),
      .flag("json", "print the result as JSON"),
    ], run: BenchWebSocketsCommand.run),
  Subcommand(
    "signaling", "K concurrent calls relayed through the server, against a minimal Node ws relay",
    options: [
      .value("calls", "concurrent calls (default 100)"),
      .value("idle", "idle sockets held meanwhile (default 10000)"),
      .value("rate", "relayed messages per second (default 5000)"),
      .value("seconds", "measuring time (default 20)"),
      .value("node-relay", "the Node relay script"),
      .value("server-binary", "the dialtone-server to start (default: next to this binary)"),
      .value("server-cpu", "run each target pinned to this CPU (with taskset; pin the bench itself elsewhere)"),
      .flag("dialtone-only", "skip the Node run"),
      .flag("node-only", "skip the Dialtone run"),
    ], run: BenchSignalingCommand.run),
  Subcommand(
    "push", "VoIP pushes to an APNs mock over one HTTP/2 connection, against aioapns",
    options: [
      .value("pushes", "how many pushes (default 5000)"),
      .value("concurrency", "pushes in flight at once (default 200)"),
      .value("repo", "the repository root, for the mock and the aioapns script (default: the current directory)"),
    ], run: BenchPushCommand.run),
  Subcommand(
    "codec", "the signaling codec against Foundation's JSONDecoder/JSONEncoder on the relay's messages",
    options: [
      .value("iterations", "messages per timed loop (default 50000; invites: a quarter)"),
      .value("repeats", "timed loops per figure; the median is printed (default 5)"),
    ], run: BenchCodecCommand.run),
]

exit(await Subcommand.main("dialtone-bench", benchmarks))
