import DialtoneCommandLine
import DialtoneSupport

/// `--log-level`: the SDK's own log (signaling's connection, each call's states) on standard
/// error beside the softphone's events, for seeing why a call did what it did.
func sdkLog(_ arguments: ArgumentList) throws -> Log {
  guard let value = arguments.string("log-level") else { return .silent }
  guard let level = LogLevel(rawValue: value.lowercased()) else {
    throw ArgumentError(message: "--log-level expects debug, info, warning or error")
  }
  return Log(level: level, subsystem: "", format: .text)
}
