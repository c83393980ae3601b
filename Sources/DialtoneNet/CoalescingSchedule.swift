/// When the loop's coalescing timer must expire: a pure value, times in (any monotonic
/// nanosecond clock), the timer's changes out.
///
/// A held message is due at its deadline and may wait `slack` past it (a quarter delay) for
/// traffic: every received message sends what is due. The timer is only for quiet spells, so it
/// follows the oldest message still held (`oldestMoved`): armed for that deadline plus `slack`,
/// and left alone while it expires between half the slack and the whole slack past it. Under
/// traffic the oldest deadline is always moments ahead (what was due has left at the last
/// message), so the timer stays at least half a slack ahead of the loop: it is moved on (one
/// system call, no wake-up) at most once per half slack, and expires only after half a slack
/// with no message received. An expiry sends what is due and sets the timer for the oldest
/// message left, at its deadline plus the slack, so expiries are more than `slack` apart.
///
/// The bound: while anything is held, the timer expires no later than the oldest deadline plus
/// `slack`, and so no later than any held message's (deadlines only grow). A message leaves by
/// its deadline plus `slack`, the delay, unless the loop is busy then (it serves the expiry, or
/// the next message, when it is done).
struct CoalescingSchedule: Sendable, Equatable {
  let slack: UInt64
  /// The time the timer is armed to expire at; nil when it is not armed.
  private(set) var armedUntil: UInt64?

  enum Change: Sendable, Equatable {
    case arm(at: UInt64)
    case disarm
  }

  init(slack: UInt64) {
    self.slack = slack
  }

  /// The oldest message still held changed (what was due left, or the first was held): its
  /// deadline is `oldest`, nil when nothing is held. The change to make to the timer, nil for none.
  mutating func oldestMoved(to oldest: UInt64?) -> Change? {
    guard let oldest else {
      guard armedUntil != nil else { return nil }
      armedUntil = nil
      return .disarm
    }
    let latest = oldest.addingReportingOverflow(slack)
    let target = latest.overflow ? UInt64.max : latest.partialValue
    if let armedUntil, armedUntil <= target, armedUntil >= oldest, armedUntil - oldest >= slack / 2 { return nil }
    armedUntil = target
    return .arm(at: target)
  }

  /// The timer expired (what was due has left): `oldest` as for `oldestMoved`. The expiry must be
  /// consumed, so the change is never nil: armed for the oldest message left, or disarmed.
  mutating func expired(oldest: UInt64?) -> Change {
    armedUntil = nil
    return oldestMoved(to: oldest) ?? .disarm
  }
}
