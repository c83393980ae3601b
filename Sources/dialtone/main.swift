import DialtoneCommandLine
import Foundation

/// `dialtone <command> [options]`
let commands: [String: (ArgumentList) async throws -> Int32] = [
  "token": TokenCommand.run,
  "call": SoftphoneCommand.call,
  "answer": SoftphoneCommand.answer,
]

let usage = """
  usage: dialtone <command> [options]

  commands:
    token      mint a client token:  dialtone token --user alice [--device phone] [--name "Alice"] [--ttl 3600] [--secret S | --data-dir D]
    call       dialtone call --server URL --token T --to USER [--audio tone|silence|FILE.wav] [--tone-frequency HZ]
                             [--record OUT.wav] [--duration S] [--relay-only] [--no-trickle] [--json]
    answer     dialtone answer --server URL --token T [--auto] [--audio ...] [--record OUT.wav] [--duration S] [--relay-only] [--no-trickle] [--json]
               Lines typed on stdin go over the data channel. Exit status: 0 completed, 1 error, 2 usage,
               3 declined, 4 busy, 5 missed, 6 failed (ICE/connection lost), 7 cancelled, 8 answered elsewhere.
  Benchmarks are a separate executable: dialtone-bench.
  """

var arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = commands[name] else {
  FileHandle.standardError.write(Data((usage + "\n").utf8))
  exit(arguments.isEmpty || arguments.first == "--help" ? 0 : 2)
}
arguments.removeFirst()
do {
  exit(try await command(ArgumentList(arguments)))
} catch let error as ArgumentError {
  FileHandle.standardError.write(Data("dialtone \(name): \(error.message)\n".utf8))
  exit(2)
} catch {
  FileHandle.standardError.write(Data("dialtone \(name): \(error)\n".utf8))
  exit(1)
}
