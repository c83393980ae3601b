import DialtoneSupport

/// The set-up times of the latest calls (accept to first media, from final quality reports),
/// for the admin dashboard's distribution and percentiles. A ring of fixed size.
final class SetupTimeSamples: Sendable {
  static let boundsMs = [100, 250, 500, 1000, 2000, 5000, 10000]

  struct Summary: Sendable, Equatable {
    /// Per bucket of `boundsMs`, and one more for longer ones.
    var counts: [Int]
    var samples: Int
    var p50Ms: Int?
    var p90Ms: Int?
  }

  private struct Ring: Sendable {
    var values: [Int] = []
    var next = 0
  }

  private let capacity: Int
  private let ring = Locked(Ring())

  init(capacity: Int = 500) { self.capacity = max(1, capacity) }

  func add(_ ms: Int) {
    ring.withLock { ring in
      if ring.values.count < capacity {
        ring.values.append(ms)
      } else {
        ring.values[ring.next] = ms
      }
      ring.next = (ring.next + 1) % capacity
    }
  }

  var summary: Summary {
    let values = ring.current.values.sorted()
    var counts = Array(repeating: 0, count: Self.boundsMs.count + 1)
    for value in values { counts[Self.boundsMs.firstIndex { value <= $0 } ?? Self.boundsMs.count] += 1 }
    func percentile(_ p: Double) -> Int? {
      values.isEmpty ? nil : values[min(values.count - 1, Int((p * Double(values.count)).rounded(.up)) - 1)]
    }
    return Summary(counts: counts, samples: values.count, p50Ms: percentile(0.5), p90Ms: percentile(0.9))
  }
}
