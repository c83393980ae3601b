import DialtoneCommandLine
import Testing

private let options: [CommandOption] = [
  .value("server", "the server"), .value("duration", "seconds"), .repeatable("turn-url", "TURN URLs"),
  .flag("json", "JSON lines"),
]

@Suite struct ArgumentListTests {
  @Test func valuesFlagsAndRepeatables() throws {
    let parsed = try ArgumentList(
      ["--server", "http://a", "--turn-url=turn:x", "--json", "--turn-url", "turn:y", "--duration", "2.5"],
      options: options)
    #expect(parsed.string("server") == "http://a")
    #expect(parsed.strings("turn-url") == ["turn:x", "turn:y"])
    #expect(parsed.flag("json"))
    #expect(try parsed.double("duration", default: 0) == 2.5)
    #expect(try parsed.int("missing", default: 7) == 7)
    #expect(parsed.given(in: options).map(\.option.name) == ["server", "duration", "turn-url"])
  }

  // The same rules for every executable: nothing undeclared, nothing stray, nothing half-given.
  @Test(arguments: [
    (["--nope", "1"], "unknown option --nope"),
    (["http://a"], "unexpected argument \"http://a\""),
    (["-x"], "unexpected argument \"-x\""),
    (["--json=yes"], "--json takes no value"),
    (["--server"], "--server needs a value"),
    (["--"], "unexpected argument \"--\""),
  ])
  func badArgumentsAreClearErrors(_ arguments: [String], _ message: String) {
    #expect(throws: ArgumentError(message: message)) { try ArgumentList(arguments, options: options) }
  }

  @Test func numbersAndRequiredValuesAreChecked() throws {
    let parsed = try ArgumentList(["--duration", "soon", "--server="], options: options)
    #expect(throws: ArgumentError(message: "--duration expects a number, got \"soon\"")) {
      try parsed.double("duration", default: 0)
    }
    #expect(throws: ArgumentError(message: "--server is required")) { try parsed.required("server") }
    let infinite = try ArgumentList(["--duration", "inf"], options: options)
    #expect(throws: ArgumentError.self) { try infinite.double("duration", default: 0) }
  }

  // DIALTONE_* variables stand in for options not given; the command line wins, and replaces
  // a repeatable option's list as a whole.
  @Test func theEnvironmentFillsIn() throws {
    let environment = [
      "DIALTONE_SERVER": "http://env", "DIALTONE_TURN_URL": "turn:a, turn:b", "DIALTONE_JSON": "true",
      "DIALTONE_DURATION": "",
    ]
    let fromEnvironment = try ArgumentList([], options: options, environment: environment)
    #expect(fromEnvironment.string("server") == "http://env")
    #expect(fromEnvironment.strings("turn-url") == ["turn:a", "turn:b"])
    #expect(fromEnvironment.flag("json"))
    #expect(fromEnvironment.string("duration") == nil)
    let overridden = try ArgumentList(
      ["--server", "http://cli", "--turn-url", "turn:c"], options: options,
      environment: environment)
    #expect(overridden.string("server") == "http://cli")
    #expect(overridden.strings("turn-url") == ["turn:c"])
    // Without an environment, none is read.
    #expect(try ArgumentList([], options: options).string("server") == nil)
  }

  @Test func helpIsAlwaysAccepted() throws {
    #expect(try ArgumentList(["--help"], options: options).wantsHelp)
    #expect(try ArgumentList(["--json"], options: options).wantsHelp == false)
  }

  @Test func subcommandsReportUsageErrorsWithStatus2() async {
    let ran = Subcommand("go", "runs", options: options) { arguments in arguments.flag("json") ? 5 : 4 }
    #expect(await Subcommand.main("tool", [ran], arguments: ["go", "--json"]) == 5)
    #expect(await Subcommand.main("tool", [ran], arguments: ["go"]) == 4)
    #expect(await Subcommand.main("tool", [ran], arguments: ["go", "--bogus"]) == 2)
    #expect(await Subcommand.main("tool", [ran], arguments: ["stop"]) == 2)
    let failing = Subcommand("fail", "throws", options: []) { _ in throw ArgumentError(message: "bad") }
    #expect(await Subcommand.main("tool", [failing], arguments: ["fail"]) == 2)
  }

  @Test func usageListsEveryOptionAndItsVariable() {
    let text = CommandOption.usage(options, environment: true)
    for option in options { #expect(text.contains("--\(option.name)")) }
    #expect(text.contains("env DIALTONE_TURN_URL"))
    #expect(!text.contains("env DIALTONE_JSON"))
  }
}
