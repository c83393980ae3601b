import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The device's STUN/TURN servers, kept ready so that dialing never waits for the network.
///
/// TURN credentials are short-lived. The cache is filled from `welcome` (`iceServers`,
/// `iceServersTtl`, via `update(servers:ttl:)`) and by a fetcher (the app wires it to
/// `GET /v1/ice-servers`). It refreshes ahead of expiry (at `refreshFraction` of the TTL),
/// retries failed fetches with backoff, and `current()` never suspends: it returns the cached
/// servers while they are valid, else the configured defaults, kicking a background refresh.
///
/// The refresh loop keeps only a weak reference to the cache while it sleeps; `stop()` ends it.
public actor IceServerCache {
  public typealias Fetcher = @Sendable () async throws -> (servers: [IceServer], ttl: Int)

  public struct Policy: Sendable, Equatable {
    /// Refresh when this fraction of the TTL has elapsed (0 < fraction ≤ 1).
    public var refreshFraction: Double = 0.8
    /// Delays between failed fetches; the last repeats.
    public var retryDelays: [Duration] = [
      .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]
    /// A fetch that has not finished after this long counts as failed.
    public var fetchTimeout: Duration = .seconds(15)
    /// The shortest wait before a scheduled refresh (guards against tiny or zero TTLs).
    public var minimumRefreshDelay: Duration = .seconds(1)

    public init() {}
  }

  /// Where `current()` got its servers.
  public enum Source: Sendable, Equatable {
    case cache
    case defaults
  }

  /// What the refresh loop is doing.
  public enum Phase: Sendable, Equatable {
    /// Nothing scheduled (no fetcher, not started, or stopped).
    case idle
    /// Waiting to refresh ahead of expiry.
    case waitingToRefresh
    /// A fetch is in flight.
    case fetching
    /// Waiting to retry after a failed fetch.
    case backingOff
  }

  public let defaults: [IceServer]
  private let fetcher: Fetcher?
  private let clock: any DialtoneClock
  private let policy: Policy

  private var servers: [IceServer]?
  private var expiry: Date?
  private var loop: Task<Void, Never>?
  private var fetchTask: Task<Void, Never>?
  /// Bumped whenever the loop is rescheduled; stale sleeps, fetches and timeouts compare it.
  private var epoch = 0
  public private(set) var phase: Phase = .idle
  /// Failed fetches since the last success.
  public private(set) var consecutiveFailures = 0
  /// Completed fetches (successful or not), for diagnostics.
  public private(set) var fetchAttempts = 0

  /// - Parameters:
  ///   - defaults: the fallback servers (e.g. a STUN list) used when nothing valid is cached.
  ///   - fetcher: fetches fresh servers and their TTL in seconds; nil when only `welcome` fills the cache.
  ///   - clock: time source for expiry, refresh and backoff.
  public init(
    defaults: [IceServer], fetcher: Fetcher? = nil, clock: any DialtoneClock = SystemClock(),
    policy: Policy = Policy()
  ) {
    self.defaults = defaults
    self.fetcher = fetcher
    self.clock = clock
    var checked = policy
    if !(checked.refreshFraction > 0 && checked.refreshFraction <= 1) { checked.refreshFraction = 0.8 }
    if checked.retryDelays.isEmpty { checked.retryDelays = [.seconds(5)] }
    self.policy = checked
  }

  deinit {
    loop?.cancel()
    fetchTask?.cancel()
  }

  // MARK: Reading

  /// The servers to dial with, at once: the cached ones if still valid, else the defaults.
  /// When the cache has expired this also kicks a background refresh (never awaited).
  public func current() -> [IceServer] {
    currentWithSource().servers
  }

  /// `current()` and where the servers came from.
  public func currentWithSource() -> (servers: [IceServer], source: Source) {
    if let servers, isFresh { return (servers, .cache) }
    refreshInBackgroundIfIdle()
    return (defaults, .defaults)
  }

  /// Whether cached servers exist and have not expired.
  public var isFresh: Bool {
    guard servers != nil, let expiry else { return false }
    return clock.now < expiry
  }

  /// When the cached servers expire (nil when nothing is cached).
  public var expiresAt: Date? { expiry }

  // MARK: Filling

  /// Stores servers received from `welcome` or elsewhere, valid for `ttl` seconds, and
  /// schedules the next refresh ahead of their expiry.
  public func update(servers: [IceServer], ttl: Int) {
    store(servers: servers, ttl: ttl)
    consecutiveFailures = 0
    if fetcher != nil { scheduleRefresh() } else { cancelLoop() }
  }

  /// Call at launch: fetches now unless valid servers are cached, then keeps them fresh.
  public func prewarm() {
    guard fetcher != nil else { return }
    switch phase {
    case .fetching, .backingOff: return
    case .waitingToRefresh: if !isFresh { startFetch() }
    case .idle: if isFresh { scheduleRefresh() } else { startFetch() }
    }
  }

  /// Stops the refresh loop; cached servers stay usable until they expire. `prewarm()`,
  /// `update(servers:ttl:)` or an expired `current()` start it again.
  public func stop() {
    cancelLoop()
  }

  /// Drops the cached servers (e.g. on sign-out) and stops refreshing.
  public func clear() {
    servers = nil
    expiry = nil
    consecutiveFailures = 0
    cancelLoop()
  }

  // MARK: The refresh loop

  private func store(servers: [IceServer], ttl: Int) {
    self.servers = servers
    expiry = clock.now.addingTimeInterval(TimeInterval(max(ttl, 0)))
  }

  private func cancelLoop() {
    epoch &+= 1
    loop?.cancel()
    loop = nil
    fetchTask?.cancel()
    fetchTask = nil
    phase = .idle
  }

  /// Called from `current()` when the cache is unusable: fetch now unless a fetch is already
  /// in flight or a retry is scheduled (so repeated dialing does not bypass the backoff).
  private func refreshInBackgroundIfIdle() {
    guard fetcher != nil else { return }
    switch phase {
    case .fetching, .backingOff: return
    case .idle, .waitingToRefresh: startFetch()
    }
  }

  private func scheduleRefresh() {
    var delay = policy.minimumRefreshDelay
    if let expiry {
      let remaining = expiry.timeIntervalSince(clock.now)
      // Refresh at `refreshFraction` of the lifetime that is left now, i.e. of the TTL for
      // servers that were just stored.
      delay = max(policy.minimumRefreshDelay, .seconds(remaining * policy.refreshFraction))
    }
    schedule(after: delay, phase: .waitingToRefresh)
  }

  private func scheduleRetry() {
    let index = min(max(consecutiveFailures - 1, 0), policy.retryDelays.count - 1)
    schedule(after: max(policy.retryDelays[index], .zero), phase: .backingOff)
  }

  private func schedule(after delay: Duration, phase newPhase: Phase) {
    cancelLoop()
    let token = epoch
    phase = newPhase
    loop = Task { [weak self, clock] in
      do { try await clock.sleep(for: delay) } catch { return }
      await self?.wake(token: token)
    }
  }

  private func wake(token: Int) {
    guard token == epoch else { return }
    startFetch()
  }

  private func startFetch() {
    guard let fetcher else { return }
    cancelLoop()
    let token = epoch
    phase = .fetching
    let timeout = policy.fetchTimeout
    // The fetch runs in its own task so that a fetcher that never returns (and ignores
    // cancellation) cannot block the loop: the timeout below abandons it.
    fetchTask = Task { [weak self] in
      let result: Result<(servers: [IceServer], ttl: Int), any Error>
      do { result = .success(try await fetcher()) } catch { result = .failure(error) }
      await self?.fetchFinished(token: token, result: result)
    }
    loop = Task { [weak self, clock] in
      do { try await clock.sleep(for: timeout) } catch { return }
      await self?.fetchFinished(token: token, result: .failure(CancellationError()))
    }
  }

  private func fetchFinished(token: Int, result: Result<(servers: [IceServer], ttl: Int), any Error>) {
    guard token == epoch, phase == .fetching else { return }
    fetchAttempts += 1
    switch result {
    case .success(let fetched):
      store(servers: fetched.servers, ttl: fetched.ttl)
      consecutiveFailures = 0
      scheduleRefresh()
    case .failure:
      consecutiveFailures += 1
      scheduleRetry()
    }
  }
}
