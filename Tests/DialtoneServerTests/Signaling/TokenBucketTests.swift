import Foundation
import Testing

@testable import DialtoneServer

/// The buckets alone, in virtual time.
struct TokenBucketTests {
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  @Test func aBurstThenTheSustainedRate() {
    var bucket = TokenBucket(.init(perSecond: 2, burst: 4), now: t0)
    for _ in 0..<4 { #expect(bucket.take(now: t0) == nil) }
    #expect(bucket.take(now: t0) == .milliseconds(500))
    #expect(bucket.take(now: t0.addingTimeInterval(0.25)) == .milliseconds(250))
    #expect(bucket.take(now: t0.addingTimeInterval(0.5)) == nil)
    // A long quiet spell refills to the burst, never beyond it.
    let later = t0.addingTimeInterval(3600)
    for _ in 0..<4 { #expect(bucket.take(now: later) == nil) }
    #expect(bucket.take(now: later) != nil)
  }

  @Test func aClockThatStepsBackRefillsNothing() {
    var bucket = TokenBucket(.init(perSecond: 1, burst: 1), now: t0)
    #expect(bucket.take(now: t0) == nil)
    #expect(bucket.take(now: t0.addingTimeInterval(-100)) != nil)
    #expect(bucket.take(now: t0.addingTimeInterval(1)) == nil)
  }

  @Test func aZeroRateIsNoLimit() {
    var bucket = TokenBucket(.init(perSecond: 0, burst: 0), now: t0)
    for _ in 0..<1000 { #expect(bucket.take(now: t0) == nil) }
  }

  @Test func keysHaveBucketsOfTheirOwnAndTheTableIsBounded() {
    var limiter = RateLimiter<String>(.init(perSecond: 1, burst: 1), maxKeys: 2)
    #expect(limiter.take("a", now: t0) == nil)
    #expect(limiter.take("a", now: t0) != nil)
    #expect(limiter.take("b", now: t0) == nil)
    // Full table, every bucket draining: a new key waits instead of growing the table.
    #expect(limiter.take("c", now: t0) != nil && limiter.trackedKeys == 2)
    // Refilled buckets carry nothing and make room.
    #expect(limiter.take("c", now: t0.addingTimeInterval(2)) == nil && limiter.trackedKeys == 1)
  }
}
