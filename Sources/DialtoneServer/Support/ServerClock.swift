import Foundation

/// Time as the server's state machines see it. Injected so tests drive ring timeouts, grace
/// windows and hello deadlines with virtual time.
public protocol ServerClock: Sendable {
  var now: Date { get }
  /// Runs `action` once after `seconds` (on an arbitrary thread) unless cancelled.
  func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction
}

public protocol ScheduledAction: Sendable {
  func cancel()
}

public struct SystemClock: ServerClock {
  public init() {}
  public var now: Date { Date() }

  public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
    let item = DispatchWorkItem(block: action)
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: item)
    return DispatchScheduledAction(item: item)
  }
}

private final class DispatchScheduledAction: ScheduledAction, @unchecked Sendable {
  // @unchecked: DispatchWorkItem is immutable here and its cancel() is thread-safe.
  let item: DispatchWorkItem
  init(item: DispatchWorkItem) { self.item = item }
  func cancel() { item.cancel() }
}

extension Date {
  var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}
