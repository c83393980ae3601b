import DialtoneNet
import DialtoneProtocol

/// Drops the second copy of a ring that reaches one session from another node. A device that
/// connects to one node while its call starts on another is rung twice by a race: the call's
/// node delivers the invite to the session it just found, and also answers the session's
/// announcement by ringing it again (the invite and the caller's trickle so far), as it does for
/// every new session; a node that takes a call over sends its ring and its accept again
/// (`CallRouter.catchUp`). Only the copies differ, never the messages: an invite or an accept
/// for a call, or a candidate of a call (with its username fragment), that the session already
/// got is never news. Bounded: the oldest keys go first.
struct RingReplayFilter {
  private var seen: Set<String> = []
  private var order = FIFOQueue<String>()
  let capacity: Int

  init(capacity: Int = 256) { self.capacity = max(1, capacity) }

  /// Whether the message should be delivered (false: a copy of one delivered before).
  mutating func admit(_ message: ServerMessage) -> Bool {
    guard let key = Self.key(message) else { return true }
    guard seen.insert(key).inserted else { return false }
    order.append(key)
    while seen.count > capacity, let oldest = order.popFirst() { seen.remove(oldest) }
    return true
  }

  private static func key(_ message: ServerMessage) -> String? {
    switch message {
    case .invite(let m): return "i\u{0}" + m.callId
    case .accept(let m): return "a\u{0}" + m.callId
    case .candidate(let m):
      // An ICE restart's candidates may repeat a line under a new username fragment.
      let c = m.candidate
      return ["c", m.callId, c.candidate, c.sdpMid ?? "", c.usernameFragment ?? ""].joined(separator: "\u{0}")
    default: return nil
    }
  }
}
