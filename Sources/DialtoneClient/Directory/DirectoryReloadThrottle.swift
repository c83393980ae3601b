import Foundation

/// When the app may ask the system to reload its Call Directory extension: at most once per
/// `interval` (the system rations reloads; one an hour by default), at once for a change the
/// user made, and after a failed reload only once a backoff (doubling up to `interval`) passed.
/// A pure value; time is passed in.
public struct DirectoryReloadThrottle: Sendable, Equatable {
  public enum Decision: Sendable, Equatable {
    case reloadNow
    /// Ask again at this time (nothing is lost: the latest directory is loaded then).
    case notBefore(Date)
  }

  public let interval: TimeInterval
  public let firstBackoff: TimeInterval
  private var lastReload: Date?
  private var retryAt: Date?
  private var backoff: TimeInterval

  public init(interval: TimeInterval = 3600, firstBackoff: TimeInterval = 60) {
    self.interval = interval
    self.firstBackoff = firstBackoff
    backoff = firstBackoff
  }

  /// Whether to reload now; `userInitiated` (a block or unblock the user just made) skips the
  /// interval but not a failure's backoff.
  public mutating func request(now: Date, userInitiated: Bool = false) -> Decision {
    if let retryAt, now < retryAt { return .notBefore(retryAt) }
    if !userInitiated, let lastReload, now < lastReload.addingTimeInterval(interval) {
      return .notBefore(lastReload.addingTimeInterval(interval))
    }
    lastReload = now
    return .reloadNow
  }

  /// What the system said of the reload `request` allowed.
  public mutating func finished(now: Date, succeeded: Bool) {
    if succeeded {
      retryAt = nil
      backoff = firstBackoff
    } else {
      retryAt = now.addingTimeInterval(backoff)
      backoff = min(backoff * 2, interval)
    }
  }
}
