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
  private var answers: [String: ServerMessage] = [:]
  private var order = FIFOQueue<String>()
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
    if let answer = answers[key] { return .answered(answer) }
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
  /// that the request, sent again, is handled as new. Its place in the eviction order stays: at
  /// worst a later answer to the same request is let go early (a repeat then handled afresh).
  package mutating func forget(sessionID: String, requestID: String) {
    answers.removeValue(forKey: sessionID + "\u{0}" + requestID)
  }

  /// Remembers the answer; the repeats that waited for it, to be answered too.
  package mutating func answered(_ request: ForwardedRequest, _ reply: ServerMessage) -> [ForwardedRequest] {
    let key = Self.key(request)
    let waiting = inFlight.removeValue(forKey: key) ?? []
    if answers.updateValue(reply, forKey: key) == nil { order.append(key) }
    while answers.count > capacity, let oldest = order.popFirst() { answers.removeValue(forKey: oldest) }
    return waiting
  }
}
