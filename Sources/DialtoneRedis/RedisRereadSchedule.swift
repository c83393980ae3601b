import DialtoneSupport
import Foundation

/// When a connection reads again what it knows of its servers (a cluster's slot map and replicas,
/// one server's replicas): every `interval`, and before the next round trip once something
/// pointed at a change (`stale`: a WAIT came back short, or counted a replica not known of).
struct RedisRereadSchedule {
  let interval: Duration
  private let clock: any DialtoneClock
  private var next: Date
  var stale = false

  init(every interval: Duration, clock: any DialtoneClock) {
    self.interval = interval
    self.clock = clock
    next = clock.now.addingTimeInterval(interval.seconds)
  }

  /// Whether to read again now; when it is, the next read is due `interval` from now.
  mutating func due() -> Bool {
    let now = clock.now
    guard stale || now >= next else { return false }
    stale = false
    next = now.addingTimeInterval(interval.seconds)
    return true
  }
}
