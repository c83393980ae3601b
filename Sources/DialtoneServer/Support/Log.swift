import DialtoneJSON
import Foundation

/// The server's log, to stderr: one line per entry, as text
/// (`2026-11-29T12:00:00.000Z info    signaling: message [call=…]`) or, with `--log-format json`,
/// as one JSON object (`{"time","level","component","msg","callId"?,"sessionId"?}`).
/// Nothing secret goes in at info and above: no tokens, no SDP, no ICE candidate addresses.
public struct Log: Sendable {
  public let level: LogLevel
  public let subsystem: String
  public let format: LogFormat

  public init(level: LogLevel, subsystem: String, format: LogFormat = .text) {
    self.level = level
    self.subsystem = subsystem
    self.format = format
  }

  public func scoped(_ subsystem: String) -> Log { Log(level: level, subsystem: subsystem, format: format) }

  public func debug(_ message: @autoclosure () -> String, callId: String? = nil, sessionId: String? = nil) {
    write(.debug, message, callId, sessionId)
  }
  public func info(_ message: @autoclosure () -> String, callId: String? = nil, sessionId: String? = nil) {
    write(.info, message, callId, sessionId)
  }
  public func warning(_ message: @autoclosure () -> String, callId: String? = nil, sessionId: String? = nil) {
    write(.warning, message, callId, sessionId)
  }
  public func error(_ message: @autoclosure () -> String, callId: String? = nil, sessionId: String? = nil) {
    write(.error, message, callId, sessionId)
  }

  private func write(_ at: LogLevel, _ message: () -> String, _ callId: String?, _ sessionId: String?) {
    guard at >= level else { return }
    let line = Self.line(
      at, subsystem: subsystem, message: message(), callId: callId, sessionId: sessionId, format: format, time: Date())
    FileHandle.standardError.write(Data(line.utf8))
  }

  static func line(
    _ at: LogLevel, subsystem: String, message: String, callId: String?, sessionId: String?, format: LogFormat,
    time: Date
  ) -> String {
    let stamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(time)
    switch format {
    case .text:
      var context = ""
      if let callId { context += " call=\(callId)" }
      if let sessionId { context += " session=\(sessionId)" }
      let padded = at.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)
      return "\(stamp) \(padded) \(subsystem): \(message)\(context.isEmpty ? "" : " [\(context.dropFirst())]")\n"
    case .json:
      var object: [String: JSONValue] = [
        "time": .string(stamp), "level": .string(at.rawValue), "component": .string(subsystem),
        "msg": .string(message),
      ]
      if let callId { object["callId"] = .string(callId) }
      if let sessionId { object["sessionId"] = .string(sessionId) }
      return JSONValue.object(object).serializedString + "\n"
    }
  }
}
