import Foundation

/// Routes SIGINT/SIGTERM to the application.
///
/// libuv (inside lws) owns those signals in every process that runs a network loop, so handlers
/// cannot be installed with `signal()`; lws reports them through `signal_cb`, which lands here.
/// Several loops may report the same signal: handlers must be idempotent.
public enum ProcessSignals {
  private final class Registry: @unchecked Sendable {
    // @unchecked: `handler` is only read and written under `lock`.
    let lock = NSLock()
    var handler: (@Sendable (Int32) -> Void)?
  }
  private static let registry = Registry()

  /// Installs the process's termination handler (replacing any earlier one).
  public static func onTermination(_ handler: @escaping @Sendable (Int32) -> Void) {
    registry.lock.withLock { registry.handler = handler }
  }

  static func deliver(_ signum: Int32) {
    let handler = registry.lock.withLock { registry.handler }
    guard let handler else {
      // Nobody asked to drain: behave like the default disposition.
      exit(128 + signum)
    }
    handler(signum)
  }
}
