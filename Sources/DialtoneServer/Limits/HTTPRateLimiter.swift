import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// HTTP requests per remote address (`ServerLimits.httpRequestsPerSecond`): over the rate, 429
/// with `Retry-After`. `/healthz` is never limited, so load balancers and probes keep working.
actor HTTPRateLimiter {
  private var limiter: RateLimiter<String>
  private let clock: any DialtoneClock

  init(rate: TokenBucket.Rate, clock: any DialtoneClock) {
    limiter = RateLimiter(rate)
    self.clock = clock
  }

  func check(_ request: HTTPRequest) -> HTTPResponse? {
    guard request.path != "/healthz", let wait = limiter.take(request.remoteAddress, now: clock.now) else {
      return nil
    }
    // Retry-After is in whole seconds (RFC 9110 10.2.3), rounded up.
    let seconds = max(1, (wait.milliseconds + 999) / 1000)
    return .error(
      HTTPError(
        status: ErrorCode.rateLimited.httpStatus, code: ErrorCode.rateLimited.rawValue,
        message: "too many requests from this address; retry in \(seconds) s",
        headers: [HTTPHeaderField("retry-after", "\(seconds)")]))
  }
}
