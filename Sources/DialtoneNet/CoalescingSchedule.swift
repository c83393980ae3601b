/// When the loop's coalescing timer must expire: a pure value, times in (any monotonic
/// nanosecond clock), the expiry to arm out.
///
/// The timer is armed for the oldest held message's deadline and left alone while newer ones
/// are held (deadlines only grow, so it never expires late for them). When it expires, what is
/// due leaves and it is armed for the oldest message still held, but never sooner than
/// `minimumGap` later: under traffic a message is held every few hundred microseconds, and an
/// expiry for each would be a wake-up per message. So a message waits at most its hold time
/// plus `minimumGap`, the timer expires at most once per `minimumGap`, and not at all once
/// nothing is held.
struct CoalescingSchedule: Sendable {
  let minimumGap: UInt64
  /// The time the timer is armed to expire at; nil when it is not armed.
  private(set) var armedUntil: UInt64?

  init(minimumGap: UInt64) {
    self.minimumGap = minimumGap
  }

  /// A message is held until `deadline`: the time to arm the timer for, or nil when it is armed
  /// to expire no later already.
  mutating func held(until deadline: UInt64) -> UInt64? {
    if let armedUntil, armedUntil <= deadline { return nil }
    armedUntil = deadline
    return deadline
  }

  /// The timer expired at `now` (and what was due has left): `oldest` is the deadline of the
  /// oldest message still held. The time to arm the timer for next, or nil when nothing waits.
  mutating func expired(oldest: UInt64?, now: UInt64) -> UInt64? {
    guard let oldest else {
      armedUntil = nil
      return nil
    }
    let next = max(oldest, now + minimumGap)
    armedUntil = next
    return next
  }
}
