import Foundation

/// One subcommand of an executable (`dialtone call`, `dialtone-bench ws`): its options and what it runs.
public struct Subcommand: Sendable {
  public let name: String
  public let summary: String
  public let options: [CommandOption]
  public let run: @Sendable (ArgumentList) async throws -> Int32

  public init(
    _ name: String, _ summary: String, options: [CommandOption],
    run: @escaping @Sendable (ArgumentList) async throws -> Int32
  ) {
    self.name = name
    self.summary = summary
    self.options = options
    self.run = run
  }

  /// Picks the subcommand named by the first argument, parses the rest with its options and
  /// runs it. Exit status: the command's, 2 for a usage error, 1 for any other error.
  public static func main(
    _ program: String, _ commands: [Subcommand], footer: String = "",
    arguments: [String] = Array(CommandLine.arguments.dropFirst())
  ) async -> Int32 {
    func usage() -> String {
      var text = "usage: \(program) <command> [options]\n\ncommands:\n"
      for command in commands {
        text += "\n  \(command.name): \(command.summary)\n" + CommandOption.usage(command.options)
      }
      return text + (footer.isEmpty ? "" : "\n" + footer + "\n")
    }
    guard let name = arguments.first, name != "--help" else {
      FileHandle.standardError.write(Data(usage().utf8))
      return 0
    }
    guard let command = commands.first(where: { $0.name == name }) else {
      FileHandle.standardError.write(Data("\(program): unknown command \"\(name)\"\n\n\(usage())".utf8))
      return 2
    }
    do {
      let parsed = try ArgumentList(Array(arguments.dropFirst()), options: command.options)
      if parsed.wantsHelp {
        print(
          "usage: \(program) \(command.name) [options]\n\n\(command.summary)\n\n" + CommandOption.usage(command.options)
        )
        return 0
      }
      return try await command.run(parsed)
    } catch let error as ArgumentError {
      FileHandle.standardError.write(Data("\(program) \(name): \(error.message)\n".utf8))
      return 2
    } catch {
      FileHandle.standardError.write(Data("\(program) \(name): \(error)\n".utf8))
      return 1
    }
  }
}
