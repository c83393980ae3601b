import Foundation

/// Token buckets by key (a user id, an IP address). The table is bounded: full buckets carry
/// no information and are dropped first; when every bucket is still draining and the table is
/// at `maxKeys`, a new key is refused rather than growing memory without bound.
struct RateLimiter<Key: Hashable & Sendable>: Sendable {
  let rate: TokenBucket.Rate
  let maxKeys: Int
  private var buckets: [Key: TokenBucket] = [:]
  /// A prune walks the whole table: at most one a second, so a flood of new keys at the cap
  /// costs a refusal each, not a walk each.
  private var nextPrune = Date.distantPast

  init(_ rate: TokenBucket.Rate, maxKeys: Int = 100_000) {
    self.rate = rate
    self.maxKeys = max(1, maxKeys)
  }

  var trackedKeys: Int { buckets.count }

  /// nil when `key` may go on, otherwise how long it should wait.
  mutating func take(_ key: Key, now: Date) -> Duration? {
    guard !rate.isUnlimited else { return nil }
    if buckets[key] == nil {
      if buckets.count >= maxKeys, now >= nextPrune {
        prune(now: now)
        nextPrune = now.addingTimeInterval(1)
      }
      guard buckets.count < maxKeys else { return .seconds(1) }
      buckets[key] = TokenBucket(rate, now: now)
    }
    return buckets[key]?.take(now: now)
  }

  /// Drops the buckets that have refilled: forgetting them is the same as keeping them.
  mutating func prune(now: Date) {
    buckets = buckets.filter { !$0.value.isFull(now: now) }
  }
}
