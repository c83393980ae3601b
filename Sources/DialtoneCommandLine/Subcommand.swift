import Foundation

/// One subcommand of an executable (`dialtone call`, `dialtone-bench ws`): its options and what it runs.
public struct Subcommand: Sendable {
  public let name: String
  public let summary: String
  public let options: [CommandOption]
  /// The name of the command's one bare argument (`dialtone group join CALL_ID`), if any.
  public let positional: String?
  public let run: @Sendable (ArgumentList) async throws -> Int32

  /// `name` may be two words (`"group call"`).
  public init(
    _ name: String, _ summary: String, options: [CommandOption], positional: String? = nil,
    run: @escaping @Sendable (ArgumentList) async throws -> Int32
  ) {
    self.name = name
    self.summary = summary
    self.options = options
    self.positional = positional
    self.run = run
  }

  private var usageName: String { positional.map { "\(name) <\($0)>" } ?? name }

  /// Picks the subcommand named by the first argument, parses the rest with its options and
  /// runs it. Exit status: the command's, 2 for a usage error, 1 for any other error.
  public static func main(
    _ program: String, _ commands: [Subcommand], footer: String = "",
    arguments: [String] = Array(CommandLine.arguments.dropFirst())
  ) async -> Int32 {
    func usage() -> String {
      var text = "usage: \(program) <command> [options]\n\ncommands:\n"
      for command in commands {
        text += "\n  \(command.usageName): \(command.summary)\n" + CommandOption.usage(command.options)
      }
      return text + (footer.isEmpty ? "" : "\n" + footer + "\n")
    }
    guard let name = arguments.first, name != "--help" else {
      FileHandle.standardError.write(Data(usage().utf8))
      return 0
    }
    let twoWords = arguments.count > 1 ? name + " " + arguments[1] : nil
    let match =
      commands.first(where: { $0.name == twoWords }).map { ($0, 2) }
      ?? commands.first(where: { $0.name == name }).map {
        ($0, 1)
      }
    guard let (command, words) = match else {
      FileHandle.standardError.write(Data("\(program): unknown command \"\(twoWords ?? name)\"\n\n\(usage())".utf8))
      return 2
    }
    do {
      let parsed = try ArgumentList(
        Array(arguments.dropFirst(words)), options: command.options, positional: command.positional)
      if parsed.wantsHelp {
        print(
          "usage: \(program) \(command.usageName) [options]\n\n\(command.summary)\n\n"
            + CommandOption.usage(command.options))
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
