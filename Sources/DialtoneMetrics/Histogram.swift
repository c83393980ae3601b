import DialtoneSupport

/// Observations counted into fixed buckets (Prometheus `histogram`): cumulative on exposition,
/// kept per bucket here so that an observation costs one lock and one increment.
public final class Histogram: Sendable {
  public struct Snapshot: Sendable, Equatable {
    /// Upper bounds, ascending; the implicit last bucket is +Inf.
    public let bounds: [Double]
    /// Per bucket (not cumulative), `bounds.count + 1` of them.
    public let counts: [UInt64]
    public let sum: Double
    public var count: UInt64 { counts.reduce(0, +) }

    /// The bucket bound below which `quantile` of the observations fall (the bucket's upper
    /// bound, as Prometheus' `histogram_quantile` would interpolate to at most); nil when empty.
    public func upperBound(ofQuantile quantile: Double) -> Double? {
      let total = count
      guard total > 0 else { return nil }
      let rank = quantile * Double(total)
      var seen: UInt64 = 0
      for (index, bucket) in counts.enumerated() {
        seen += bucket
        if Double(seen) >= rank { return index < bounds.count ? bounds[index] : .infinity }
      }
      return .infinity
    }
  }

  private struct State: Sendable {
    var counts: [UInt64]
    var sum: Double = 0
  }

  public let bounds: [Double]
  private let state: Locked<State>

  init(bounds: [Double]) {
    let sorted = Array(Set(bounds.filter(\.isFinite))).sorted()
    self.bounds = sorted
    state = Locked(State(counts: Array(repeating: 0, count: sorted.count + 1)))
  }

  public func observe(_ value: Double) {
    guard value.isFinite else { return }
    let index = bounds.firstIndex { value <= $0 } ?? bounds.count
    state.withLock {
      $0.counts[index] += 1
      $0.sum += value
    }
  }

  public var snapshot: Snapshot {
    let current = state.current
    return Snapshot(bounds: bounds, counts: current.counts, sum: current.sum)
  }
}
