import DialtoneClient
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

private let stun = [IceServer(urls: ["stun:stun.example.test:3478"])]
private let turnA = [IceServer(urls: ["turn:turn.example.test:3478"], username: "a", credential: "pa")]
private let turnB = [IceServer(urls: ["turn:turn.example.test:3478"], username: "b", credential: "pb")]

@Suite struct IceServerCacheTests {
  @Test func cachedServersAreReturnedUntilTheyExpireThenDefaults() async {
    let clock = ManualClock()
    let cache = IceServerCache(defaults: stun, clock: clock)
    #expect(await cache.current() == stun)
    await cache.update(servers: turnA, ttl: 100)
    #expect(await cache.current() == turnA)
    #expect(await cache.currentWithSource().source == .cache)
    clock.advance(by: 99)
    #expect(await cache.current() == turnA)
    clock.advance(by: 1)
    #expect(await cache.isFresh == false)
    #expect(await cache.current() == stun)
    #expect(await cache.currentWithSource().source == .defaults)
  }

  @Test func expiredCacheFallsBackAndKicksABackgroundRefresh() async {
    let clock = ManualClock()
    let fetcher = ScriptedIceFetcher([.servers(turnB, ttl: 100)])
    let cache = IceServerCache(defaults: stun, fetcher: { try await fetcher.fetch() }, clock: clock)
    await cache.update(servers: turnA, ttl: 0)
    // Expired: defaults now, fetched in the background.
    #expect(await cache.current() == stun)
    #expect(await eventually { await cache.current() == turnB })
    #expect(await fetcher.calls == 1)
  }

  @Test func prewarmFetchesAndRefreshesAtEightyPercentOfTheTTL() async {
    let clock = ManualClock()
    let fetcher = ScriptedIceFetcher([.servers(turnA, ttl: 100), .servers(turnB, ttl: 100)])
    let cache = IceServerCache(defaults: stun, fetcher: { try await fetcher.fetch() }, clock: clock)
    await cache.prewarm()
    #expect(await eventually { await cache.current() == turnA })
    // The refresh's own timer: the fetch's cancelled timeout may still be counted for a moment.
    #expect(await eventually { await cache.phase == .waitingToRefresh && clock.hasTimer(dueIn: 80) })
    clock.advance(by: 79)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await fetcher.calls == 1)
    clock.advance(by: 1)  // 80 s = 80% of 100 s: refreshed before expiry
    #expect(await eventually { await cache.current() == turnB })
    #expect(await fetcher.calls == 2)
    #expect(await cache.expiresAt == clock.now.addingTimeInterval(100))
  }

  @Test func welcomeUpdateReschedulesTheRefresh() async {
    let clock = ManualClock()
    let fetcher = ScriptedIceFetcher([.servers(turnB, ttl: 1000)])
    let cache = IceServerCache(defaults: stun, fetcher: { try await fetcher.fetch() }, clock: clock)
    await cache.update(servers: turnA, ttl: 50)
    #expect(await eventually { clock.sleeperCount == 1 })
    clock.advance(by: 39)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await fetcher.calls == 0)
    clock.advance(by: 1)
    #expect(await eventually { await cache.current() == turnB })
    await cache.stop()
  }

  @Test func failuresFallBackToDefaultsAndRetryWithBackoff() async {
    let clock = ManualClock()
    let fetcher = ScriptedIceFetcher([.fail, .fail, .servers(turnA, ttl: 100)])
    var policy = IceServerCache.Policy()
    policy.retryDelays = [.seconds(1), .seconds(2), .seconds(4)]
    let cache = IceServerCache(defaults: stun, fetcher: { try await fetcher.fetch() }, clock: clock, policy: policy)
    await cache.prewarm()
    // The retry's own timer: the failed fetch's cancelled timeout may still be counted for a moment.
    #expect(await eventually { await cache.phase == .backingOff && clock.hasTimer(dueIn: 1) })
    #expect(await cache.consecutiveFailures == 1)
    #expect(await cache.current() == stun)
    // Dialing during the backoff does not bypass it.
    #expect(await fetcher.calls == 1)
    clock.advance(by: 1)
    #expect(await eventually { await cache.consecutiveFailures == 2 && clock.hasTimer(dueIn: 2) })
    clock.advance(by: 1.5)
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await fetcher.calls == 2)  // second delay is 2 s
    clock.advance(by: 0.5)
    #expect(await eventually { await cache.current() == turnA })
    #expect(await fetcher.calls == 3)
    #expect(await cache.consecutiveFailures == 0)
    await cache.stop()
  }

  @Test func dialingNeverWaitsForAFetcherThatNeverReturns() async {
    let clock = ManualClock()
    let fetcher = ScriptedIceFetcher([.hang])
    var policy = IceServerCache.Policy()
    policy.fetchTimeout = .seconds(15)
    policy.retryDelays = [.seconds(5)]
    let cache = IceServerCache(defaults: stun, fetcher: { try await fetcher.fetch() }, clock: clock, policy: policy)
    await cache.prewarm()
    #expect(await eventually { await fetcher.calls == 1 })
    // The fetch hangs; current() still answers at once, with the defaults.
    #expect(await cache.current() == stun)
    #expect(await cache.phase == .fetching)
    // The hung fetch times out and is retried after the backoff.
    #expect(await eventually { clock.sleeperCount == 1 })
    clock.advance(by: 15)
    #expect(await eventually { await cache.phase == .backingOff })
    await fetcher.setScript([.servers(turnA, ttl: 100)])
    #expect(await eventually { clock.sleeperCount == 1 })
    clock.advance(by: 5)
    #expect(await eventually { await cache.current() == turnA })
    await fetcher.releaseHung()
    // The abandoned fetch's late failure changes nothing.
    try? await Task.sleep(for: .milliseconds(20))
    #expect(await cache.current() == turnA)
    await cache.stop()
  }
}
