import DialtoneSupport
import Foundation

/// Refuses a webhook event whose id was already admitted within the window. A captured request
/// stays valid for the token's five minutes plus leeway; the ten-minute default window outlasts
/// that, so a replay is refused by one check or the other.
///
/// Bounded: past `capacity` ids the oldest are forgotten first. Only requests that passed the
/// signature check reach the guard, so only LiveKit itself can fill it.
package final class LiveKitWebhookReplayGuard: Sendable {
  package static let defaultWindow: Duration = .seconds(600)
  package static let defaultCapacity = 10_000

  private let memory: Locked<LiveKitRecentIDs>

  package init(window: Duration = defaultWindow, capacity: Int = defaultCapacity) {
    memory = Locked(LiveKitRecentIDs(window: window.seconds, capacity: max(1, capacity)))
  }

  /// Remembers `id` as seen at `now`, or throws `.replayed` if it was seen within the window.
  package func admit(_ id: String, now: Date) throws(LiveKitWebhookError) {
    guard memory.withLock({ $0.admit(id, now: now) }) else { throw .replayed(id: id) }
  }

  /// How many ids are remembered (for tests of the bound).
  package var count: Int { memory.withLock { $0.count } }
}

/// The guard's state: ids by when they were admitted, and the same ids in admission order so
/// the oldest can be dropped without a scan.
package struct LiveKitRecentIDs: Sendable {
  private struct Admission: Sendable {
    package let id: String
    package let at: Date
    /// Tells an id's current admission from an older one still queued (an id admitted again
    /// after its window passed).
    package let serial: UInt64
  }

  package let window: TimeInterval
  package let capacity: Int
  private var byID: [String: Admission] = [:]
  private var order: [Admission] = []
  private var head = 0
  private var nextSerial: UInt64 = 0

  package init(window: TimeInterval, capacity: Int) {
    self.window = window
    self.capacity = capacity
  }

  package var count: Int { byID.count }
  /// Queue entries, superseded ones included (for tests of the bound).
  package var queued: Int { order.count - head }

  /// A clock that stepped back makes an admission look recent, never old: erring towards
  /// refusing a duplicate is the safe side.
  package mutating func admit(_ id: String, now: Date) -> Bool {
    dropExpired(now: now)
    if let previous = byID[id], now.timeIntervalSince(previous.at) < window { return false }
    let admission = Admission(id: id, at: now, serial: nextSerial)
    nextSerial &+= 1
    byID[id] = admission
    order.append(admission)
    // Queued entries that a later admission of the same id superseded are dropped here too, so
    // the queue stays within twice the capacity even when time does not move forward.
    while byID.count > capacity || order.count - head > 2 * capacity { dropOldest() }
    compact()
    return true
  }

  private mutating func dropExpired(now: Date) {
    while head < order.count, now.timeIntervalSince(order[head].at) >= window { dropOldest() }
  }

  private mutating func dropOldest() {
    guard head < order.count else { return }
    let oldest = order[head]
    head += 1
    if byID[oldest.id]?.serial == oldest.serial { byID[oldest.id] = nil }
  }

  /// Reclaims the dropped prefix once it is most of the array, so each admission costs O(1)
  /// amortized.
  private mutating func compact() {
    guard head > 64, head * 2 > order.count else { return }
    order.removeFirst(head)
    head = 0
  }
}
