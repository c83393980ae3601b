/// When the loop's coalescing timer must expire: a pure value, times in (any monotonic
/// nanosecond clock), the expiry to arm out.
///
/// The timer is armed for the oldest held message's deadline and left alone while newer ones
/// are held (deadlines only grow, so it never expires late for them). Under traffic, received
/// messages release what is due and the timer, when it expires, finds nothing due and is armed
/// once more for the oldest deadline left: at most one expiry per hold time, never one per
/// message, and none at all once nothing is held.
struct CoalescingSchedule: Sendable {
  /// The time the timer is armed to expire at; nil when it is not armed.
  private(set) var armedUntil: UInt64?

  /// A message is held until `deadline`: the time to arm the timer for, or nil when it is armed
  /// to expire no later already.
  mutating func held(until deadline: UInt64) -> UInt64? {
    if let armedUntil, armedUntil <= deadline { return nil }
    armedUntil = deadline
    return deadline
  }

  /// The timer expired (and what was due has been released): `oldest` is the deadline of the
  /// oldest message still held. The time to arm the timer for next, or nil when nothing waits.
  mutating func expired(oldest: UInt64?) -> UInt64? {
    armedUntil = oldest
    return oldest
  }
}
