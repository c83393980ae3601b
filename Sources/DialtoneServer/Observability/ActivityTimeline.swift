import DialtoneSupport
import Foundation

/// What happened per minute over the last hour (call outcomes, pushes, media paths), for the
/// admin dashboard's plots. Bounded: a fixed number of buckets, older ones dropped.
final class ActivityTimeline: Sendable {
  struct Bucket: Sendable, Equatable {
    /// ms since the Unix epoch.
    var start: Int64
    var ended: [String: Int] = [:]
    var pushesSent = 0
    var pushFailures = 0
    var relayed = 0
    var direct = 0
  }

  let bucketSeconds: Int64
  let bucketCount: Int
  private let buckets = Locked<[Int64: Bucket]>([:])

  init(bucketSeconds: Int64 = 60, bucketCount: Int = 60) {
    self.bucketSeconds = bucketSeconds
    self.bucketCount = bucketCount
  }

  func record(at date: Date, _ change: (inout Bucket) -> Void) {
    let index = self.index(date)
    buckets.withLock { buckets in
      var bucket = buckets[index] ?? Bucket(start: index * bucketSeconds * 1000)
      change(&bucket)
      buckets[index] = bucket
      let oldest = index - Int64(bucketCount) + 1
      if buckets.count > bucketCount { buckets = buckets.filter { $0.key >= oldest } }
    }
  }

  /// The last `bucketCount` buckets up to `now`, oldest first, empty ones included.
  func snapshot(now: Date) -> [Bucket] {
    let last = index(now)
    let stored = buckets.current
    return ((last - Int64(bucketCount) + 1)...last).map { stored[$0] ?? Bucket(start: $0 * bucketSeconds * 1000) }
  }

  private func index(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 / Double(bucketSeconds)).rounded(.down))
  }
}
