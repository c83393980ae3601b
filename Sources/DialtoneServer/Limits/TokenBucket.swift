import Foundation

/// A token bucket: `burst` tokens, refilled at `perSecond`. A pure value on injected time, so
/// limits are tested in virtual time.
struct TokenBucket: Sendable, Equatable {
  struct Rate: Sendable, Equatable {
    /// Sustained requests per second.
    var perSecond: Double
    /// How many may come at once after a quiet spell.
    var burst: Double

    /// A rate of 0 turns the limit off.
    var isUnlimited: Bool { perSecond <= 0 }

    static func perMinute(_ count: Double, burst: Double) -> Rate { Rate(perSecond: count / 60, burst: burst) }
  }

  let rate: Rate
  private var tokens: Double
  private var updated: Date

  init(_ rate: Rate, now: Date) {
    self.rate = rate
    tokens = rate.burst
    updated = now
  }

  /// Takes a token: nil when allowed, otherwise how long until one is available (the
  /// `retryAfter` a refused client is told).
  mutating func take(now: Date) -> Duration? {
    guard !rate.isUnlimited else { return nil }
    refill(now: now)
    if tokens >= 1 {
      tokens -= 1
      return nil
    }
    return .milliseconds(Int64(((1 - tokens) / rate.perSecond * 1000).rounded(.up)))
  }

  /// Full again, so forgetting this bucket changes nothing (see `RateLimiter.prune`).
  func isFull(now: Date) -> Bool {
    rate.isUnlimited || tokens + max(0, now.timeIntervalSince(updated)) * rate.perSecond >= rate.burst
  }

  private mutating func refill(now: Date) {
    let elapsed = now.timeIntervalSince(updated)
    // A clock that steps back refills nothing, rather than draining the bucket.
    if elapsed > 0 { tokens = min(rate.burst, tokens + elapsed * rate.perSecond) }
    updated = max(updated, now)
  }
}
