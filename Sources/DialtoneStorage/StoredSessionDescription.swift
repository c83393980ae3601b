import DialtoneProtocol
import Foundation

/// How `live_calls` keeps an invite's offer and an accept's answer: the SDP as it is, in a column
/// of its own, and the message's JSON without it. Encoding the SDP into the JSON (escaping every
/// line break of ~1.5 KB) was most of what the journal spent on a call's statements, twice for
/// the invite (with its offer while it rang, without it once answered) and once for the accept;
/// the SDP bound as it is costs a copy. A row of the earlier form (the SDP inside the JSON, the
/// column NULL) reads back as it did.
enum StoredSessionDescription {
  /// The message without its session description, and that description's SDP. The message as it
  /// is, and nil, when it carries none, or when its SDP holds a NUL byte: a text value is bound
  /// and read up to its first NUL, and inside the JSON the NUL is escaped.
  static func split(_ message: ServerMessage) -> (message: ServerMessage, sdp: String?) {
    switch message {
    case .invite(var invite):
      guard let offer = invite.offer, storable(offer.sdp) else { return (message, nil) }
      invite.offer = nil
      return (.invite(invite), offer.sdp)
    case .accept(var accept):
      guard let answer = accept.answer, storable(answer.sdp) else { return (message, nil) }
      accept.answer = nil
      return (.accept(accept), answer.sdp)
    default:
      return (message, nil)
    }
  }

  /// The message `split` took apart, from its two stored halves.
  static func joined(_ message: ServerMessage, sdp: String?) -> ServerMessage {
    guard let sdp else { return message }
    switch message {
    case .invite(var invite):
      invite.offer = SessionDescription(sdp: sdp)
      return .invite(invite)
    case .accept(var accept):
      accept.answer = SessionDescription(sdp: sdp)
      return .accept(accept)
    default:
      return message
    }
  }

  private static func storable(_ sdp: String) -> Bool {
    let hasNUL = sdp.utf8.withContiguousStorageIfAvailable { bytes in
      bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false
    }
    return !(hasNUL ?? sdp.utf8.contains(0))
  }
}
