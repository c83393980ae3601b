import DialtoneServer
import Foundation

/// Virtual time: scheduled actions run only when a test advances the clock, in deadline order.
final class ManualClock: ServerClock, @unchecked Sendable {
  // @unchecked: all state is touched under `lock`; actions run outside it.
  private let lock = NSLock()
  private var current: Date
  private var pending: [(deadline: Date, order: Int, action: @Sendable () -> Void, token: Token)] = []
  private var counter = 0

  final class Token: ScheduledAction, @unchecked Sendable {
    // @unchecked: `cancelled` is only touched under the clock's lock.
    weak var clock: ManualClock?
    var cancelled = false
    func cancel() { clock?.lock.withLock { cancelled = true } }
  }

  init(start: Date = Date()) { current = start }

  var now: Date { lock.withLock { current } }

  func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
    let token = Token()
    token.clock = self
    lock.withLock {
      counter += 1
      pending.append((current.addingTimeInterval(seconds), counter, action, token))
    }
    return token
  }

  /// Moves time forward, running every action that falls due, in order.
  func advance(by seconds: Double) {
    let target = lock.withLock { current.addingTimeInterval(seconds) }
    while true {
      let next: (@Sendable () -> Void)? = lock.withLock {
        pending.removeAll { $0.token.cancelled }
        guard
          let index = pending.indices.min(by: {
            (pending[$0].deadline, pending[$0].order) < (pending[$1].deadline, pending[$1].order)
          }),
          pending[index].deadline <= target
        else { return nil }
        let item = pending.remove(at: index)
        current = max(current, item.deadline)
        return item.action
      }
      guard let next else { break }
      next()
    }
    lock.withLock { current = target }
  }

  var pendingCount: Int { lock.withLock { pending.filter { !$0.token.cancelled }.count } }

  /// Waits (in real time, bounded) until an action is scheduled `seconds` from now: the server
  /// schedules its timers on its own thread, possibly after the message a test waited for.
  func waitForTimer(dueIn seconds: Double) async -> Bool {
    for _ in 0..<1000 {
      let found = lock.withLock {
        pending.contains { !$0.token.cancelled && abs($0.deadline.timeIntervalSince(current) - seconds) < 0.001 }
      }
      if found { return true }
      try? await Task.sleep(for: .milliseconds(5))
    }
    return false
  }
}
