import DialtoneCommandLine
import Foundation

/// `dialtone-bench <benchmark> [options]`: each compares Dialtone with a named peer in the same
/// run; results and commands are in docs/benchmarks.md.
private let benchmarks: [Subcommand] = [
  Subcommand(
    "ws", "hold N idle authenticated WebSocket connections and measure them",
    options: [
      .value("connections", "how many sockets are measured (default 15000)"),
      .value("batch", "handshakes in flight at once (default 500)"),
      .value("warmup", "sockets opened (and kept) before the baseline, not counted (default 200)"),
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
      .value("candidates", "ICE candidates each side sends per call (default 20)"),
      .value("node-relay", "the Node relay script"),
      .value("server-binary", "the dialtone-server to start (default: next to this binary)"),
      .value("server-cpu", "run each target pinned to this CPU (with taskset; pin the bench itself elsewhere)"),
      .flag("dialtone-only", "skip the Node run"),
      .flag("node-only", "skip the Dialtone run"),
      .repeatable("target", "drive running servers instead (repeat for a cluster's nodes): ws://HOST:PORT/v1/ws"),
      .value("secret", "with --target: the servers' --auth-secret"),
      .repeatable("measure-pid", "with --target: a process whose CPU counts (repeat: the nodes and Redis)"),
      .repeatable("breakdown-pid", "with --target: a measured process also reported on its own (Redis)"),
      .value("label", "with --target: the row's name (default: the number of targets)"),
      .flag("json", "with --target: print the report as JSON"),
      .flag("interleave", "both targets up at once, the load switched between them in slices (A B B A)"),
      .value("slice", "with --interleave: seconds per slice (default 1); --seconds is per target"),
      .value("warmup-pairs", "with --interleave: slice pairs run first and left out (default 1)"),
      .value("baseline-binary", "with --interleave: B is this dialtone-server instead of the Node relay"),
    ], run: BenchSignalingCommand.run),
  Subcommand(
    "signaling-idle", "(for signaling --interleave) hold N idle sockets to one relay until stdin closes",
    options: [
      .value("url", "the relay's WebSocket URL"),
      .value("secret", "Dialtone's --auth-secret (without it: the Node relay's dialect)"),
      .value("count", "idle sockets (default 10000)"),
      .value("seconds", "exit after this long at the latest (default 600)"),
    ], run: BenchSignalingIdleCommand.run),
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
  Subcommand(
    "ws-echo", "a WebSocket echo endpoint on the server's stack and limits, for the Autobahn cases",
    options: [
      .value("port", "loopback port to listen on (default 9001; 0 picks a free one and prints it)"),
      .value("path", "the WebSocket path (default /v1/ws, as the server)"),
      .value("max-message-bytes", "larger messages close with 1009 (default: the server's 65536)"),
      .value("seconds", "exit after this long at the latest (default 900)"),
    ], run: BenchWebSocketEchoCommand.run),
  Subcommand(
    "ws-autobahn-client", "drive the WebSocket client through an Autobahn fuzzing server's cases",
    options: [
      .value("url", "the fuzzing server, ws://127.0.0.1:PORT"),
      .value("agent", "the agent name in the reports (default dialtone)"),
      .value("max-message-bytes", "larger messages close with 1009 (default: the client's 1048576)"),
      .value("case-seconds", "longest one case may take before it is closed (default 60)"),
    ], run: BenchAutobahnClientCommand.run),
]

exit(await Subcommand.main("dialtone-bench", benchmarks))
