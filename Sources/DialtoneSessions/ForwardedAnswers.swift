import DialtoneCalls
import DialtoneProtocol
import DialtoneSupport

/// The answers a node gave to requests other nodes forwarded, by origin session and request id:
/// a request forwarded again (its node got no answer in time, or the device resumed on another
/// node and retried) is answered as the first time instead of being handled twice, so a
/// candidate is relayed once however often it is sent. A repeat of a request still being
/// handled waits for its answer, and gets it too (it may come from another node now). Holds at
/// most `capacity` answers, oldest first out, and a few waiting repeats per request.
package struct ForwardedAnswers {
  /// Each answer with the stamp of its place in `order`.
  private var answers: [String: (reply: ServerMessage, stamp: UInt64)] = [:]
  /// Oldest first; an entry whose stamp is not its answer's any more (forgotten, or forgotten
  /// and answered again since) is stale: skipped when its turn comes, dropped in a compaction.
  private var order = FIFOQueue<(key: String, stamp: UInt64)>()
  private var stamps: UInt64 = 0
  /// Requests being handled, with the repeats waiting for their answer.
  private var inFlight: [String: [ForwardedRequest]] = [:]
  package static let maxWaiting = 4
  package let capacity: Int

  package init(capacity: Int = 4096) { self.capacity = max(1, capacity) }

  package enum Seen {
    case new
    case answered(ServerMessage)
    case inFlight
  }

  package static func key(_ request: ForwardedRequest) -> String { request.origin.sessionID + "\u{0}" + request.id }

  /// Whether the request was seen before; a new one is in flight from now on, and a repeat of
  /// one in flight waits for its answer.
  package mutating func arrive(_ request: ForwardedRequest) -> Seen {
    let key = Self.key(request)
    if let answer = answers[key] { return .answered(answer.reply) }
    if var waiting = inFlight[key] {
      if waiting.count < Self.maxWaiting {
        waiting.append(request)
        inFlight[key] = waiting
      }
      return .inFlight
    }
    inFlight[key] = []
    return .new
  }

  /// Forgets the answer (it never reached its requester: `ClusterEvent.forwardedDropped`), so
  /// that the request, sent again, is handled as new. It leaves the eviction order too: a later
  /// answer to the same request takes a new place, at the end (its old entry is stale), and the
  /// stale entries are dropped once they outnumber the capacity, so the order stays bounded
  /// however often answers are forgotten.
  package mutating func forget(sessionID: String, requestID: String) {
    guard answers.removeValue(forKey: sessionID + "\u{0}" + requestID) != nil else { return }
    if order.count - answers.count > capacity {
      var live = FIFOQueue<(key: String, stamp: UInt64)>()
      for entry in order where answers[entry.key]?.stamp == entry.stamp { live.append(entry) }
      order = live
    }
  }

  /// Entries in the eviction order, stale ones included (tests: it stays bounded).
  package var orderCount: Int { order.count }

  /// An answer that is not remembered (a relayed candidate's, unstored: the request sent again
  /// is handled afresh); the repeats that waited for it, to be answered too.
  package mutating func answeredUnremembered(_ request: ForwardedRequest) -> [ForwardedRequest] {
    inFlight.removeValue(forKey: Self.key(request)) ?? []
  }

  /// Remembers the answer; the repeats that waited for it, to be answered too.
  package mutating func answered(_ request: ForwardedRequest, _ reply: ServerMessage) -> [ForwardedRequest] {
    let key = Self.key(request)
    let waiting = inFlight.removeValue(forKey: key) ?? []
    if let kept = answers[key] {
      answers[key] = (reply, kept.stamp)  // an answer replaced keeps its place
    } else {
      stamps += 1
      answers[key] = (reply, stamps)
      order.append((key, stamps))
    }
    while answers.count > capacity, let oldest = order.popFirst() {
      if answers[oldest.key]?.stamp == oldest.stamp { answers.removeValue(forKey: oldest.key) }
    }
    return waiting
  }
}
