import Foundation

/// How much a log says: entries below a log's level are not even formatted.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
  case debug, info, warning, error
  private var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }
  public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// One thing worth saying, with the call or session it is about.
public struct LogEntry: Sendable, Equatable {
  public let time: Date
  public let level: LogLevel
  /// The part of the system speaking (`signaling`, `janus`, `call-engine`, …).
  public let component: String
  public let message: String
  public let callId: String?
  public let sessionId: String?

  public init(
    time: Date, level: LogLevel, component: String, message: String, callId: String? = nil, sessionId: String? = nil
  ) {
    self.time = time
    self.level = level
    self.component = component
    self.message = message
    self.callId = callId
    self.sessionId = sessionId
  }
}

/// Where log entries go: the server's standard error, an app's own logger (os.Logger, a file,
/// a crash reporter's breadcrumbs), or a test's memory. Called on whatever thread logs: a sink
/// that keeps state guards it itself and never blocks for long.
public protocol LogSink: Sendable {
  func write(_ entry: LogEntry)
}

/// The one logger of every Dialtone module, server and SDK alike: a level, a component name and
/// a sink. Nothing secret goes in at info and above: no tokens, no SDP, no ICE candidate
/// addresses.
public struct Log: Sendable {
  public let level: LogLevel
  public let subsystem: String
  public let sink: any LogSink

  public init(level: LogLevel, subsystem: String, sink: any LogSink) {
    self.level = level
    self.subsystem = subsystem
    self.sink = sink
  }

  /// To standard error, as text or JSON lines (the server's log).
  public init(level: LogLevel, subsystem: String, format: LogFormat = .text) {
    self.init(level: level, subsystem: subsystem, sink: StandardErrorLog(format: format))
  }

  /// Says nothing (the default of the SDK's components until an app gives them a log).
  public static let silent = Log(level: .error, subsystem: "", sink: DiscardingLog())

  public func scoped(_ subsystem: String) -> Log { Log(level: level, subsystem: subsystem, sink: sink) }

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

  public func isEnabled(_ at: LogLevel) -> Bool { at >= level }

  private func write(_ at: LogLevel, _ message: () -> String, _ callId: String?, _ sessionId: String?) {
    guard at >= level else { return }
    sink.write(
      LogEntry(
        time: Date(), level: at, component: subsystem, message: message(), callId: callId, sessionId: sessionId))
  }
}

/// A sink that drops everything.
public struct DiscardingLog: LogSink {
  public init() {}
  public func write(_ entry: LogEntry) {}
}
