import Foundation

/// Line-oriented log to stderr: `2026-11-29T12:00:00.000Z info  signaling: message`.
public struct Log: Sendable {
  public let level: LogLevel
  public let subsystem: String

  public init(level: LogLevel, subsystem: String) {
    self.level = level
    self.subsystem = subsystem
  }

  public func scoped(_ subsystem: String) -> Log { Log(level: level, subsystem: subsystem) }

  public func debug(_ message: @autoclosure () -> String) { write(.debug, message) }
  public func info(_ message: @autoclosure () -> String) { write(.info, message) }
  public func warning(_ message: @autoclosure () -> String) { write(.warning, message) }
  public func error(_ message: @autoclosure () -> String) { write(.error, message) }

  private func write(_ at: LogLevel, _ message: () -> String) {
    guard at >= level else { return }
    let stamp = Date().ISO8601Format(
      .iso8601.time(includingFractionalSeconds: true).year().month().day().dateTimeSeparator(.standard))
    let line = "\(stamp) \(at.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)) \(subsystem): \(message())\n"
    FileHandle.standardError.write(Data(line.utf8))
  }
}
