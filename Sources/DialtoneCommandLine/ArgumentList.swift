/// Minimal `--flag value` parsing for the CLI's subcommands.
public struct ArgumentList: Sendable {
  private var values: [String: [String]] = [:]
  private var flags: Set<String> = []

  public init(_ arguments: [String], booleanFlags: Set<String> = ["json", "auto", "relay-only", "no-trickle", "help", "node-only", "dialtone-only"]) {
    var index = 0
    while index < arguments.count {
      let argument = arguments[index]
      guard argument.hasPrefix("--") else { index += 1; continue }
      var name = String(argument.dropFirst(2))
      if let eq = name.firstIndex(of: "=") {
        values[String(name[..<eq]), default: []].append(String(name[name.index(after: eq)...]))
        name = String(name[..<eq])
      } else if booleanFlags.contains(name) {
        flags.insert(name)
      } else if index + 1 < arguments.count {
        values[name, default: []].append(arguments[index + 1])
        index += 1
      } else {
        values[name, default: []].append("")
      }
      index += 1
    }
  }

  public func string(_ name: String) -> String? { values[name]?.last }
  public func strings(_ name: String) -> [String] { values[name] ?? [] }
  public func flag(_ name: String) -> Bool { flags.contains(name) }

  public func required(_ name: String) throws(ArgumentError) -> String {
    guard let value = string(name), !value.isEmpty else { throw ArgumentError(message: "--\(name) is required") }
    return value
  }

  public func int(_ name: String, default fallback: Int) throws(ArgumentError) -> Int {
    guard let text = string(name) else { return fallback }
    guard let value = Int(text) else { throw ArgumentError(message: "--\(name) expects an integer, got \"\(text)\"") }
    return value
  }

  public func double(_ name: String, default fallback: Double) throws(ArgumentError) -> Double {
    guard let text = string(name) else { return fallback }
    guard let value = Double(text) else { throw ArgumentError(message: "--\(name) expects a number, got \"\(text)\"") }
    return value
  }
}

public struct ArgumentError: Error, Sendable {
  public let message: String
  public init(message: String) { self.message = message }
}
