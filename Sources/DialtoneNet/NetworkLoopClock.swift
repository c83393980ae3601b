import DialtoneSupport
import Foundation

/// Real time for work that runs on a network loop (the signaling hub): a timer scheduled on the
/// loop's thread runs on that thread, from the loop's own timer (`NetworkExecutor.schedule`), so
/// that it costs no timer thread and its action needs no hop back; scheduled anywhere else (before
/// the loop starts, after it stops, from another thread) it goes on `base`. `now` is `base`'s.
public struct NetworkLoopClock: DialtoneClock {
  private let executor: NetworkExecutor
  private let base: any DialtoneClock

  public init(executor: NetworkExecutor, base: any DialtoneClock = SystemClock()) {
    self.executor = executor
    self.base = base
  }

  public var now: Date { base.now }

  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
    executor.schedule(after: delay, action) ?? base.schedule(after: delay, action)
  }
}
