/// The parsed `--options` of one command, with the same rules for every executable: only
/// declared options, `--name VALUE` or `--name=VALUE`, flags without a value, no stray
/// arguments. With an environment, `DIALTONE_*` variables stand in for options not given on
/// the command line (a repeatable option's variable is a comma-separated list; the command
/// line replaces it as a whole).
public struct ArgumentList: Sendable {
  private var values: [String: [String]] = [:]
  private var flags: Set<String> = []
  /// `--help` was given (always accepted).
  public private(set) var wantsHelp = false

  /// `positional`: the name one bare argument is stored under (e.g. `dialtone group join ID`);
  /// without it every bare argument is an error.
  public init(
    _ arguments: [String], options: [CommandOption], environment: [String: String]? = nil, positional: String? = nil
  )
    throws(ArgumentError)
  {
    var byName: [String: CommandOption] = [:]
    for option in options { byName[option.name] = option }
    var given: Set<String> = []
    var index = 0
    while index < arguments.count {
      let argument = arguments[index]
      index += 1
      guard argument.hasPrefix("--"), argument.count > 2 else {
        if let positional, values[positional] == nil {
          values[positional] = [argument]
          continue
        }
        throw ArgumentError(message: "unexpected argument \"\(argument)\"")
      }
      var name = String(argument.dropFirst(2))
      var inline: String?
      if let eq = name.firstIndex(of: "=") {
        inline = String(name[name.index(after: eq)...])
        name = String(name[..<eq])
      }
      if name == "help" && inline == nil {
        wantsHelp = true
        continue
      }
      guard let option = byName[name] else { throw ArgumentError(message: "unknown option --\(name)") }
      given.insert(name)
      switch option.kind {
      case .flag:
        guard inline == nil else { throw ArgumentError(message: "--\(name) takes no value") }
        flags.insert(name)
      case .value, .repeatable:
        let value: String
        if let inline {
          value = inline
        } else {
          guard index < arguments.count else { throw ArgumentError(message: "--\(name) needs a value") }
          value = arguments[index]
          index += 1
        }
        if option.kind == .value { values[name] = [value] } else { values[name, default: []].append(value) }
      }
    }
    guard let environment else { return }
    for option in options where !given.contains(option.name) {
      guard let text = environment[option.environmentName], !text.isEmpty else { continue }
      switch option.kind {
      case .flag:
        if ["1", "true", "yes"].contains(text.lowercased()) { flags.insert(option.name) }
      case .value:
        values[option.name] = [text]
      case .repeatable:
        values[option.name] = text.split(separator: ",").map { Self.trimmingSpaces($0) }.filter { !$0.isEmpty }
      }
    }
  }

  public func string(_ name: String) -> String? { values[name]?.last }
  public func strings(_ name: String) -> [String] { values[name] ?? [] }
  public func flag(_ name: String) -> Bool { flags.contains(name) }

  /// Every option that has a value, in the order of `options`, with its values.
  public func given(in options: [CommandOption]) -> [(option: CommandOption, values: [String])] {
    options.compactMap { option in values[option.name].map { (option, $0) } }
  }

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
    guard let value = Double(text), value.isFinite else {
      throw ArgumentError(message: "--\(name) expects a number, got \"\(text)\"")
    }
    return value
  }

  private static func trimmingSpaces(_ text: Substring) -> String {
    var slice = text
    while slice.first == " " { slice.removeFirst() }
    while slice.last == " " { slice.removeLast() }
    return String(slice)
  }
}
