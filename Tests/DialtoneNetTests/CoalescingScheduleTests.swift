import Testing

@testable import DialtoneNet

/// The coalescing timer's schedule, in virtual nanoseconds (a 40-unit delay: held for 30, a
/// quarter delay of 10 of slack).
struct CoalescingScheduleTests {
  @Test func theFirstHeldMessageArmsTheTimerAQuarterDelayPastItsDeadline() {
    var schedule = CoalescingSchedule(slack: 10)
    #expect(schedule.armedUntil == nil)
    #expect(schedule.oldestMoved(to: 30) == .arm(at: 40))
    #expect(schedule.armedUntil == 40)
  }

  @Test func aTimerHalfASlackOrMorePastTheOldestDeadlineIsLeftAlone() {
    var schedule = CoalescingSchedule(slack: 10)
    _ = schedule.oldestMoved(to: 30)
    #expect(schedule.oldestMoved(to: 30) == nil)
    #expect(schedule.oldestMoved(to: 35) == nil)
    #expect(schedule.armedUntil == 40)
  }

  /// The oldest deadline moved on (what was due left): once the timer would expire less than
  /// half a slack past it, it is moved to the whole slack past it, not left to wake the loop.
  @Test func aTimerTooCloseToTheOldestDeadlineIsMovedOn() {
    var schedule = CoalescingSchedule(slack: 10)
    _ = schedule.oldestMoved(to: 30)
    #expect(schedule.oldestMoved(to: 36) == .arm(at: 46))
    #expect(schedule.oldestMoved(to: 50) == .arm(at: 60))
  }

  @Test func aTimerPastTheBoundIsBroughtBack() {
    var schedule = CoalescingSchedule(slack: 10)
    _ = schedule.oldestMoved(to: 30)
    #expect(schedule.oldestMoved(to: 20) == .arm(at: 30))
  }

  @Test func waitingWithNothingHeldDisarmsAnArmedTimerOnce() {
    var schedule = CoalescingSchedule(slack: 10)
    #expect(schedule.oldestMoved(to: nil) == nil)
    _ = schedule.oldestMoved(to: 30)
    #expect(schedule.oldestMoved(to: nil) == .disarm)
    #expect(schedule.armedUntil == nil)
    #expect(schedule.oldestMoved(to: nil) == nil)
  }

  /// The expiry must be consumed by a change to the timer, even one that leaves it as it was.
  @Test func anExpiryAlwaysChangesTheTimer() {
    var schedule = CoalescingSchedule(slack: 10)
    _ = schedule.oldestMoved(to: 30)
    #expect(schedule.expired(oldest: 45) == .arm(at: 55))
    #expect(schedule.expired(oldest: nil) == .disarm)
    #expect(schedule.armedUntil == nil)
  }

  @Test func aDeadlineNearTheClocksEndDoesNotOverflow() {
    var schedule = CoalescingSchedule(slack: 10)
    #expect(schedule.oldestMoved(to: UInt64.max - 3) == .arm(at: UInt64.max))
  }

  /// The bound, for loops driven by traffic of every kind: no held message leaves later than its
  /// deadline plus the slack, nothing is left held, and expiries are more than a slack apart.
  @Test(arguments: LoadShape.allCases)
  func noHeldMessageWaitsPastItsDeadlinePlusTheSlack(_ shape: LoadShape) {
    var loop = SimulatedLoop(hold: 30_000, slack: 10_000)
    loop.run(turns: shape.turns(until: 2_000_000))
    #expect(loop.held.isEmpty)
    #expect(loop.sent > 0)
    #expect(loop.latestPastDeadline <= 10_000)
    #expect(loop.closestExpiries.map { $0 > 10_000 } ?? true)
  }

  /// Under traffic (a turn and a held message every 200 units, the slack 10,000) the timer never
  /// expires, and is moved at most once per half slack; once the traffic stops, it sends the rest.
  @Test func underTrafficTheTimerIsMovedButNeverExpires() {
    var loop = SimulatedLoop(hold: 30_000, slack: 10_000)
    loop.run(turns: LoadShape.steady.turns(until: 2_000_000))
    #expect(loop.expiries.filter { $0 < 2_000_000 }.isEmpty)
    #expect(!loop.expiries.isEmpty)
    #expect(loop.armings <= 2_000_000 / 5_000 + 8)
  }
}

/// How the loop turns in a simulation: each turn at its time, holding a message or not.
enum LoadShape: CaseIterable, Sendable {
  case steady, sparse, bursts, irregular

  func turns(until end: UInt64) -> [(time: UInt64, holds: Bool)] {
    switch self {
    case .steady:
      return stride(from: 0, to: end, by: 200).map { ($0, true) }
    case .sparse:
      return stride(from: 0, to: end, by: 47_000).map { ($0, true) }
    case .bursts:
      return stride(from: 0, to: end, by: 100_000).flatMap { start in (0..<20).map { (start + $0 * 300, $0 % 3 != 1) } }
    case .irregular:
      var state: UInt64 = 0x9E37_79B9_7F4A_7C15
      var time: UInt64 = 0
      var turns: [(UInt64, Bool)] = []
      while time < end {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        time += (state >> 33) % 25_000
        turns.append((time, (state >> 20) & 1 == 1))
      }
      return turns
    }
  }
}

/// A network loop in virtual time, as `ServerRole+Coalescing` drives the schedule: at each turn
/// (a received message) it sends what is due, then may hold a message (due `hold` later); the
/// timer follows the oldest held message as it changes, and expires between turns if it is
/// armed for before the next one.
struct SimulatedLoop {
  let hold: UInt64
  var schedule: CoalescingSchedule
  private(set) var held: [UInt64] = []
  private(set) var sent = 0
  private(set) var latestPastDeadline: UInt64 = 0
  private(set) var expiries: [UInt64] = []
  private(set) var armings = 0

  init(hold: UInt64, slack: UInt64) {
    self.hold = hold
    schedule = CoalescingSchedule(slack: slack)
  }

  var closestExpiries: UInt64? {
    zip(expiries, expiries.dropFirst()).map { $1 - $0 }.min()
  }

  mutating func run(turns: [(time: UInt64, holds: Bool)]) {
    for turn in turns {
      expire(before: turn.time)
      if send(at: turn.time) { record(schedule.oldestMoved(to: held.first)) }
      if turn.holds {
        held.append(turn.time + hold)
        if held.count == 1 || schedule.armedUntil == nil { record(schedule.oldestMoved(to: held.first)) }
      }
    }
    // Silence after the last turn: the timer alone sends the rest.
    expire(before: .max)
  }

  private mutating func expire(before next: UInt64) {
    while let expiry = schedule.armedUntil, expiry < next {
      expiries.append(expiry)
      send(at: expiry)
      record(schedule.expired(oldest: held.first))
    }
  }

  /// True when any message left.
  @discardableResult
  private mutating func send(at now: UInt64) -> Bool {
    var left = false
    while let first = held.first, first <= now {
      held.removeFirst()
      sent += 1
      left = true
      latestPastDeadline = max(latestPastDeadline, now - first)
    }
    return left
  }

  private mutating func record(_ change: CoalescingSchedule.Change?) {
    if case .arm = change { armings += 1 }
  }
}
