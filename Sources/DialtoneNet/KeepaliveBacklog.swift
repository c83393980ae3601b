import DialtoneSupport

/// The pings a keepalive sweep owes, and how fast they go out.
///
/// Sockets that connect together go quiet together, so one sweep could owe a ping to every idle
/// socket at once. Written in one pass, 10,000 pings are 10,000 writes that every message
/// arriving meanwhile waits behind, and 10,000 pongs the peers must answer at once: on a busy
/// machine that was a stall of hundreds of milliseconds. Two things spread them:
///
/// - **phases**: a socket is owed its ping only at sweeps of its own phase (`isDue`), so each
///   sweep owes about one in `phases` of the idle sockets instead of all of them at once;
/// - **riding on traffic**: what a sweep owes goes out over the next interval, a fraction of a
///   ping per message received (`planDrain`, `piggyback`), at a few microseconds per message,
///   and never more than `maxPerMessage` pings on one message: after a quiet interval (nothing
///   to spread over) a slice of 128 on each message delayed the first ones by tens of
///   milliseconds. What traffic has not carried out by the next sweep (a quiet loop, where
///   nobody waits) goes then, a slice per loop pass (`nextSlice`).
struct KeepaliveBacklog {
  /// Pings per pass when draining leftovers: about a millisecond of writes.
  let sliceSize: Int
  /// Pings one received message carries out at most: a few sends.
  let maxPerMessage: Int
  private var owed = FIFOQueue<UInt64>()
  private var perMessage = 0.0
  private var credit = 0.0

  init(sliceSize: Int = 128, maxPerMessage: Int = 4) {
    self.sliceSize = max(1, sliceSize)
    self.maxPerMessage = max(1, maxPerMessage)
  }

  var isEmpty: Bool { owed.isEmpty }
  var count: Int { owed.count }

  /// How many sweeps a socket's ping may wait for its phase: spread over the ping interval, but
  /// never so long that a ping (one sweep late at worst, when drained as a leftover) could not
  /// be answered before the idle timeout.
  static func phases(pingIntervalTicks: UInt32, idleTimeoutTicks: UInt32) -> UInt32 {
    let slack = idleTimeoutTicks > pingIntervalTicks ? (idleTimeoutTicks - pingIntervalTicks) / 2 : 0
    return max(1, min(pingIntervalTicks, slack))
  }

  /// Whether a socket quiet for `idle` ticks is owed a ping at sweep `tick`.
  static func isDue(id: UInt64, idle: UInt32, tick: UInt32, pingIntervalTicks: UInt32, phases: UInt32) -> Bool {
    guard idle >= pingIntervalTicks else { return false }
    return idle >= pingIntervalTicks &+ phases &- 1 || UInt32(id % UInt64(phases)) == tick % phases
  }

  mutating func owe(_ connectionID: UInt64) {
    owed.append(connectionID)
  }

  /// After a sweep: spread what is owed over four fifths of the messages the last interval
  /// brought (`expectedMessages`), so it is out well before the next sweep.
  mutating func planDrain(expectedMessages: Int) {
    perMessage = Double(owed.count) / max(1, Double(expectedMessages) * 0.8)
    credit = 0
  }

  /// The pings one received message carries out, oldest first (usually none or one).
  mutating func piggyback() -> [UInt64] {
    credit += perMessage
    let whole = min(Int(credit), maxPerMessage)
    guard whole > 0 else { return [] }
    credit -= Double(whole)
    return take(whole)
  }

  /// The next connections to ping when draining leftovers, oldest first; at most `sliceSize`.
  mutating func nextSlice() -> [UInt64] {
    take(sliceSize)
  }

  private mutating func take(_ limit: Int) -> [UInt64] {
    var taken: [UInt64] = []
    taken.reserveCapacity(min(limit, owed.count))
    while taken.count < limit, let id = owed.popFirst() { taken.append(id) }
    return taken
  }
}
