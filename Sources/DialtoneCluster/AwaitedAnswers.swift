import DialtoneCalls
import DialtoneSessions

/// Requests this node sent to the node running their call, whose answers have not come: one whose
/// owner died before answering is routed again once overdue, and after `maxAttempts` the device
/// is told to try again itself. The owner answers a repeat as the first time (`ForwardedAnswers`).
///
/// A request is awaited from *before* its letter goes (`sending`): the owner may answer, and this
/// node's inbox reader take the answer in, before the send returns to its thread. Awaited only
/// after, an answer that came first left the request awaited for good: it was routed again after
/// `wait`, and its answer stored in the requester's session a second time.
///
/// A pure value: time comes in as instants, so tests drive it with virtual time.
package struct AwaitedAnswers: Sendable {
  package typealias Instant = ContinuousClock.Instant

  private struct Awaited: Sendable {
    let request: ForwardedRequest
    var sentAt: Instant
    var attempts: Int
  }

  private var awaited: [String: Awaited] = [:]
  /// How long an answer may take before its request is routed again, how often it is sent, and
  /// how many requests are awaited at most (past it, one more is sent unwatched, as before a
  /// retry existed).
  package let wait: Duration
  package let maxAttempts: Int
  package let capacity: Int

  package init(wait: Duration, maxAttempts: Int, capacity: Int) {
    self.wait = wait
    self.maxAttempts = max(1, maxAttempts)
    self.capacity = max(1, capacity)
  }

  package var count: Int { awaited.count }

  /// The request's letter is about to go: its answer is awaited from `now` (a request routed
  /// again keeps its attempts). Returns whether it was not awaited before: only then does
  /// `notSent` let it go.
  package mutating func sending(_ request: ForwardedRequest, at now: Instant) -> Bool {
    let key = ForwardedAnswers.key(request)
    if var waiting = awaited[key] {
      waiting.sentAt = now
      awaited[key] = waiting
      return false
    }
    guard awaited.count < capacity else { return false }
    awaited[key] = Awaited(request: request, sentAt: now, attempts: 1)
    return true
  }

  /// The letter did not go (the call runs here, or the owner's inbox was full): nothing to await.
  package mutating func notSent(_ request: ForwardedRequest) {
    awaited.removeValue(forKey: ForwardedAnswers.key(request))
  }

  /// An answer came, for the request `ForwardedAnswers.key` names.
  package mutating func answered(_ key: String) {
    awaited.removeValue(forKey: key)
  }

  /// The requests whose answer is overdue at `now`: those to route again (awaited again from
  /// `now`), and those sent `maxAttempts` times, no longer awaited.
  package mutating func overdue(at now: Instant) -> (retry: [ForwardedRequest], expired: [ForwardedRequest]) {
    var retry: [ForwardedRequest] = []
    var expired: [ForwardedRequest] = []
    for (key, entry) in awaited where now - entry.sentAt >= wait {
      if entry.attempts >= maxAttempts {
        awaited.removeValue(forKey: key)
        expired.append(entry.request)
      } else {
        awaited[key] = Awaited(request: entry.request, sentAt: now, attempts: entry.attempts + 1)
        retry.append(entry.request)
      }
    }
    return (retry, expired)
  }
}
