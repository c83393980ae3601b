import Foundation

/// One `--option` an executable accepts.
public struct CommandOption: Sendable, Equatable {
  public enum Kind: Sendable, Equatable {
    /// `--name VALUE` or `--name=VALUE`; given twice, the last wins.
    case value
    /// `--name VALUE`, any number of times; the values are kept in order.
    case repeatable
    /// `--name`, no value.
    case flag
  }

  public let name: String
  public let kind: Kind
  public let help: String

  public init(_ name: String, _ kind: Kind = .value, help: String) {
    self.name = name
    self.kind = kind
    self.help = help
  }

  public static func value(_ name: String, _ help: String) -> CommandOption { CommandOption(name, .value, help: help) }
  public static func repeatable(_ name: String, _ help: String) -> CommandOption {
    CommandOption(name, .repeatable, help: help)
  }
  public static func flag(_ name: String, _ help: String) -> CommandOption { CommandOption(name, .flag, help: help) }

  /// The environment variable that stands in for the option: `--turn-url` is `DIALTONE_TURN_URL`.
  public var environmentName: String {
    "DIALTONE_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 })
  }

  /// Usage lines for a list of options, aligned.
  public static func usage(_ options: [CommandOption], environment: Bool = false) -> String {
    var text = ""
    for option in options {
      let left = "  --\(option.name)" + (option.kind == .flag ? "" : " VALUE")
      text += left.padding(toLength: max(28, left.count + 2), withPad: " ", startingAt: 0) + option.help + "\n"
      if environment && option.kind != .flag {
        text += String(repeating: " ", count: 28) + "env \(option.environmentName)\n"
      }
    }
    return text
  }
}

public struct ArgumentError: Error, Sendable, Equatable, CustomStringConvertible {
  public let message: String
  public init(message: String) { self.message = message }
  public var description: String { message }
}
