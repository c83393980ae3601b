import Dispatch
import Foundation

/// Time as Dialtone's state machines see it, on the standard `Duration`: wall time (records,
/// deadlines) and timers. Injected everywhere, so ring timeouts, grace windows, ICE-restart
/// backoff and credential refresh are tested with virtual time.
public protocol DialtoneClock: Sendable {
  var now: Date { get }
  /// Runs `action` once after `delay` (on an arbitrary thread) unless cancelled first.
  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction
}

public protocol ScheduledAction: Sendable {
  func cancel()
}

extension DialtoneClock {
  /// Suspends for `delay`; throws `CancellationError` when the task is cancelled first.
  public func sleep(for delay: Duration) async throws {
    try Task.checkCancellation()
    guard delay > .zero else { return }
    let wake = Locked(Wake())
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        wake.withLock { $0.waiting(continuation) }
        let scheduled = schedule(after: delay) { wake.withLock { $0.fired() } }
        let cancelled = wake.withLock { state -> Bool in
          state.scheduled = scheduled
          return state.isCancelled
        }
        if cancelled { scheduled.cancel() }
      }
    } onCancel: {
      wake.withLock { $0.cancelled() }?.cancel()
    }
  }
}

/// One sleep: its continuation is resumed exactly once, by the timer or by cancellation,
/// whichever comes first (either may happen before the continuation exists).
private struct Wake: Sendable {
  private var continuation: CheckedContinuation<Void, any Error>?
  private var outcome: Result<Void, any Error>?
  private var resumed = false
  var scheduled: (any ScheduledAction)?
  private(set) var isCancelled = false

  mutating func waiting(_ continuation: CheckedContinuation<Void, any Error>) {
    self.continuation = continuation
    if let outcome { resume(outcome) }
  }

  mutating func fired() { resume(.success(())) }

  /// Returns the timer to cancel.
  mutating func cancelled() -> (any ScheduledAction)? {
    isCancelled = true
    resume(.failure(CancellationError()))
    return scheduled
  }

  private mutating func resume(_ result: Result<Void, any Error>) {
    guard !resumed else { return }
    guard let continuation else {
      if outcome == nil { outcome = result }
      return
    }
    resumed = true
    self.continuation = nil
    continuation.resume(with: result)
  }
}

/// Real time: `Date()` and a dispatch timer.
public struct SystemClock: DialtoneClock {
  public init() {}
  public var now: Date { Date() }

  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
    let item = DispatchWorkItem(block: action)
    let (seconds, attoseconds) = delay.components
    let nanoseconds = max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds), execute: item)
    return DispatchScheduledAction(item: item)
  }
}

private final class DispatchScheduledAction: ScheduledAction, @unchecked Sendable {
  // @unchecked: DispatchWorkItem is immutable here and its cancel() is thread-safe.
  let item: DispatchWorkItem
  init(item: DispatchWorkItem) { self.item = item }
  func cancel() { item.cancel() }
}

extension Duration {
  /// The duration as seconds (for arithmetic with `Date`).
  public var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// Whole milliseconds, rounded up (a `retryAfterMs` must not say "now" when it means "soon").
  public var milliseconds: Int64 {
    let (seconds, attoseconds) = components
    return seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
  }
}
