import Synchronization

/// A value that only goes up (Prometheus `counter`); its family's name ends in `_total`.
///
/// The value is a `Double` kept as its bit pattern in an atomic and added to by compare-and-swap:
/// the network thread counts every message it receives, and a lock (plus the exclusivity check
/// of the locked value, on top of the closure) was three of the ~60 runtime access checks and
/// three lock round trips per relayed message. Other threads still read it at any time.
public final class Counter: Sendable {
  private let bits = Atomic<UInt64>(Double(0).bitPattern)

  init() {}

  public func increment(by amount: Double = 1) {
    guard amount > 0, amount.isFinite else { return }
    var seen = bits.load(ordering: .relaxed)
    while true {
      let next = (Double(bitPattern: seen) + amount).bitPattern
      let (exchanged, original) = bits.compareExchange(expected: seen, desired: next, ordering: .relaxed)
      if exchanged { return }
      seen = original
    }
  }

  public var current: Double { Double(bitPattern: bits.load(ordering: .relaxed)) }
}
