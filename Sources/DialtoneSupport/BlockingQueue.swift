import Foundation

/// A bounded first-in first-out queue that worker threads sleep on. Producers on any thread put
/// without waiting (refused when it is full or closed); a worker takes one item, or everything
/// waiting at once (a batch for one transaction), sleeping while it is empty. Closed, it takes no
/// more and its workers drain what is left, then get nil. A worker may also be woken at an
/// instant with no item (`wake(at:)`, `takeOrDeadline`): a timer that costs no thread of its own.
public final class BlockingQueue<Element: Sendable>: @unchecked Sendable {
  // @unchecked: `items`, `closed` and `deadline` are only touched under `condition`.
  private let condition = NSCondition()
  private var items = FIFOQueue<Element>()
  private var closed = false
  private var deadline: ContinuousClock.Instant?
  public let capacity: Int

  public init(capacity: Int = .max) { self.capacity = max(1, capacity) }

  public enum Refusal: Error, Sendable, Equatable {
    case full
    case closed
  }

  /// Queues `element` and wakes a worker; nil when queued, otherwise why not.
  @discardableResult
  public func put(_ element: Element) -> Refusal? {
    condition.lock()
    defer { condition.unlock() }
    if closed { return .closed }
    guard items.count < capacity else { return .full }
    items.append(element)
    condition.signal()
    return nil
  }

  /// The next item, sleeping until there is one; nil once closed and drained.
  public func take() -> Element? {
    condition.lock()
    defer { condition.unlock() }
    guard case .item(let item) = next(honouringDeadline: false) else { return nil }
    return item
  }

  /// Everything waiting, sleeping until there is something; empty once closed and drained.
  public func takeAll() -> [Element] {
    condition.lock()
    defer { condition.unlock() }
    guard case .item(let first) = next(honouringDeadline: false) else { return [] }
    var batch: [Element] = [first]
    batch.reserveCapacity(items.count + 1)
    while let item = items.popFirst() { batch.append(item) }
    return batch
  }

  /// What `takeOrDeadline` got.
  public enum Taken {
    case item(Element)
    /// The instant asked by `wake(at:)` passed (it is cleared).
    case deadline
    /// Closed and drained.
    case closed
  }

  /// Has `takeOrDeadline` return `.deadline` once `instant` passes (the earlier of this and a
  /// deadline already asked), waking a worker that sleeps without one.
  public func wake(at instant: ContinuousClock.Instant) {
    condition.lock()
    defer { condition.unlock() }
    if let deadline, deadline <= instant { return }
    deadline = instant
    condition.signal()
  }

  /// The next item, or `.deadline` once the instant `wake(at:)` asked for has passed (before any
  /// item: a queue that never empties does not starve it), sleeping until one of them.
  public func takeOrDeadline() -> Taken {
    condition.lock()
    defer { condition.unlock() }
    return next(honouringDeadline: true)
  }

  /// The one wait of every take, under the lock: the next item, `.closed` once closed and
  /// drained, or (only when `honouringDeadline`) `.deadline` first once the asked instant passed.
  private func next(honouringDeadline: Bool) -> Taken {
    while true {
      let left = honouringDeadline ? deadline.map { $0 - ContinuousClock.now } : nil
      if let left, left <= .zero {
        deadline = nil
        return .deadline
      }
      if let item = items.popFirst() { return .item(item) }
      if closed { return .closed }
      if let left {
        // NSCondition waits by the wall clock: a short wait, checked again by the monotonic one,
        // so that a wall clock set back does not stretch it.
        _ = condition.wait(until: Date(timeIntervalSinceNow: min(left, Self.longestWait).seconds))
      } else {
        condition.wait()
      }
    }
  }

  private static var longestWait: Duration { .milliseconds(50) }

  public var count: Int {
    condition.lock()
    defer { condition.unlock() }
    return items.count
  }

  /// Takes no more; the workers drain what is queued.
  public func close() {
    condition.lock()
    closed = true
    condition.broadcast()
    condition.unlock()
  }

  /// Takes no more and hands back what is queued, which no worker will see.
  public func closeNow() -> [Element] {
    condition.lock()
    closed = true
    var left: [Element] = []
    while let item = items.popFirst() { left.append(item) }
    condition.broadcast()
    condition.unlock()
    return left
  }
}
