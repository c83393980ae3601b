/// The pings a keepalive sweep owes, and how fast they go out.
///
/// Sockets that connect together go quiet together, so one sweep can owe a ping to every idle
/// socket at once. Written in that one pass, 10,000 pings are 10,000 writes that every message
/// arriving meanwhile waits behind, and 10,000 pongs the peers must answer at once: on a busy
/// machine that is a stall of hundreds of milliseconds. So the pings ride on traffic instead:
/// each message the loop receives carries out one or a few (`piggybackCount`), which spreads
/// 10,000 pings over a couple of seconds of a busy server at a few microseconds per message.
/// What traffic has not carried out by the next sweep (a quiet server, where nobody waits) goes
/// then, a slice per loop pass (`nextSlice`).
struct KeepaliveBacklog {
  /// Pings per pass when draining leftovers: about a millisecond of writes.
  let sliceSize: Int
  private var owed = FIFOQueue<UInt64>()

  init(sliceSize: Int = 128) {
    self.sliceSize = max(1, sliceSize)
  }

  var isEmpty: Bool { owed.isEmpty }
  var count: Int { owed.count }

  mutating func owe(_ connectionID: UInt64) {
    owed.append(connectionID)
  }

  /// How many pings one received message carries out: one, and one more per 8,192 owed, so
  /// that a backlog far bigger than a sweep's traffic still drains between sweeps.
  var piggybackCount: Int { min(sliceSize, 1 + owed.count / 8_192) }

  /// The pings one received message carries out, oldest first.
  mutating func piggyback() -> [UInt64] {
    take(piggybackCount)
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
