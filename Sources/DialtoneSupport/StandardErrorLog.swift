import DialtoneJSON
import Foundation

public enum LogFormat: String, Sendable, CaseIterable {
  case text, json
}

/// Log lines on standard error: as text
/// (`2026-11-29T12:00:00.000Z info    signaling: message [call=…]`) or, in `.json`, as one
/// object per line (`{"time","level","component","msg","callId"?,"sessionId"?}`).
public struct StandardErrorLog: LogSink {
  public let format: LogFormat

  public init(format: LogFormat = .text) { self.format = format }

  public func write(_ entry: LogEntry) {
    FileHandle.standardError.write(Data(Self.line(entry, format: format).utf8))
  }

  public static func line(_ entry: LogEntry, format: LogFormat) -> String {
    let stamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(entry.time)
    switch format {
    case .text:
      var context = ""
      if let callId = entry.callId { context += " call=\(callId)" }
      if let sessionId = entry.sessionId { context += " session=\(sessionId)" }
      let padded = entry.level.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)
      return "\(stamp) \(padded) \(entry.component): \(entry.message)"
        + "\(context.isEmpty ? "" : " [\(context.dropFirst())]")\n"
    case .json:
      var object: [String: JSONValue] = [
        "time": .string(stamp), "level": .string(entry.level.rawValue), "component": .string(entry.component),
        "msg": .string(entry.message),
      ]
      if let callId = entry.callId { object["callId"] = .string(callId) }
      if let sessionId = entry.sessionId { object["sessionId"] = .string(sessionId) }
      return JSONValue.object(object).serializedString + "\n"
    }
  }
}
