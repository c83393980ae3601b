import DialtoneSupport
import Foundation

/// Routes SIGINT/SIGTERM to the application.
///
/// libuv (inside lws) owns those signals in every process that runs a network loop, so handlers
/// cannot be installed with `signal()`; lws reports them through `signal_cb`, which lands here.
/// Several loops may report the same signal: handlers must be idempotent.
public enum ProcessSignals {
  private static let terminationHandler = Locked<(@Sendable (Int32) -> Void)?>(nil)

  /// Installs the process's termination handler (replacing any earlier one).
  public static func onTermination(_ handler: @escaping @Sendable (Int32) -> Void) {
    terminationHandler.withLock { $0 = handler }
  }

  static func deliver(_ signum: Int32) {
    let handler = terminationHandler.current
    guard let handler else {
      // Nobody asked to drain: behave like the default disposition.
      exit(128 + signum)
    }
    handler(signum)
  }
}
