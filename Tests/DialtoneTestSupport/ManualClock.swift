import DialtoneSupport
import Foundation

/// Virtual time for every test: scheduled actions (and so `sleep(for:)`) run only when a test
/// advances the clock, in deadline order.
public final class ManualClock: DialtoneClock, Sendable {
  private struct Entry: Sendable {
    let id: Int
    let deadline: Date
    let action: @Sendable () -> Void
  }
  private struct Timeline: Sendable {
    var current: Date
    var pending: [Entry] = []
    var nextID = 0
  }

  private final class Token: ScheduledAction, Sendable {
    let id: Int
    let clock: ManualClock
    init(id: Int, clock: ManualClock) {
      self.id = id
      self.clock = clock
    }
    func cancel() { clock.timeline.withLock { $0.pending.removeAll { $0.id == id } } }
  }

  private let start: Date
  private let timeline: Locked<Timeline>

  /// Starts at the real current time by default: tokens minted with `Date()` stay valid.
  public init(start: Date = Date()) {
    self.start = start
    timeline = Locked(Timeline(current: start))
  }

  public var now: Date { timeline.withLock { $0.current } }

  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any ScheduledAction {
    let id = timeline.withLock { t -> Int in
      t.nextID += 1
      t.pending.append(Entry(id: t.nextID, deadline: t.current.addingTimeInterval(delay.seconds), action: action))
      return t.nextID
    }
    return Token(id: id, clock: self)
  }

  /// Moves time forward, running every action that falls due, in deadline order (each at its
  /// own deadline, so actions it schedules may fall due in the same advance).
  public func advance(by seconds: Double) {
    let target = timeline.withLock { $0.current.addingTimeInterval(seconds) }
    // A nanosecond of slack: sums of Double seconds need not land exactly on a deadline.
    let horizon = target.addingTimeInterval(1e-9)
    while true {
      let next: Entry? = timeline.withLock { t in
        guard
          let index = t.pending.indices.min(by: {
            (t.pending[$0].deadline, t.pending[$0].id) < (t.pending[$1].deadline, t.pending[$1].id)
          }),
          t.pending[index].deadline <= horizon
        else { return nil }
        let entry = t.pending.remove(at: index)
        t.current = max(t.current, entry.deadline)
        return entry
      }
      guard let next else { break }
      next.action()
    }
    timeline.withLock { $0.current = max($0.current, target) }
  }

  public func advance(by duration: Duration) { advance(by: duration.seconds) }

  /// How many actions (timers, sleeping tasks) are waiting.
  public var pendingCount: Int { timeline.withLock { $0.pending.count } }
  public var sleeperCount: Int { pendingCount }

  /// Virtual seconds since the start.
  public var elapsedSeconds: Double { timeline.withLock { $0.current.timeIntervalSince(start) } }

  /// Deadlines (virtual seconds since the start) of the waiting actions, sorted.
  public var pendingDeadlines: [Double] {
    timeline.withLock { $0.pending.map { $0.deadline.timeIntervalSince(start) }.sorted() }
  }

  /// Whether an action is scheduled `seconds` from now.
  public func hasTimer(dueIn seconds: Double) -> Bool {
    timeline.withLock { t in t.pending.contains { abs($0.deadline.timeIntervalSince(t.current) - seconds) < 0.001 } }
  }

  /// Waits (in real time, bounded) until an action is scheduled `seconds` from now: servers
  /// schedule their timers on their own threads, possibly after the message a test waited for.
  public func waitForTimer(dueIn seconds: Double) async -> Bool {
    for _ in 0..<1000 {
      if hasTimer(dueIn: seconds) { return true }
      try? await Task.sleep(for: .milliseconds(5))
    }
    return false
  }
}
