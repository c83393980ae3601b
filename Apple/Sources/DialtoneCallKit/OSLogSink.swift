#if os(iOS)
  import DialtoneSupport
  import os

  /// The SDK's log into the unified logging system (Console.app, `log stream`, sysdiagnoses),
  /// one category per component (`signaling`, `call`, `push`, …) under the app's subsystem.
  ///
  /// Messages are public: at info and above the SDK writes no tokens, SDP or ICE addresses, and
  /// a call or session id is kept private unless the device is being debugged, as Apple's
  /// privacy defaults do for dynamic strings.
  public struct OSLogSink: LogSink {
    public let subsystem: String

    public init(subsystem: String) {
      self.subsystem = subsystem
    }

    public func write(_ entry: LogEntry) {
      let logger = Logger(subsystem: subsystem, category: entry.component.isEmpty ? "dialtone" : entry.component)
      let context = [entry.callId.map { "call=\($0)" }, entry.sessionId.map { "session=\($0)" }]
        .compactMap { $0 }.joined(separator: " ")
      logger.log(level: Self.type(entry.level), "\(entry.message, privacy: .public) \(context, privacy: .private)")
    }

    static func type(_ level: LogLevel) -> OSLogType {
      switch level {
      case .debug: .debug
      case .info: .info
      case .warning: .default
      case .error: .error
      }
    }
  }
#endif
