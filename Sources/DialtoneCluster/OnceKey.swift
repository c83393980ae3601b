import DialtoneProtocol

/// What makes a ring message news for a session, so that the cluster's store keeps a copy that
/// reaches one session twice only once (`SessionLedger.append(once:)`). A device that connects
/// to one node while its call starts on another is rung twice by a race: the call's node
/// delivers the invite to the session it just found, and also answers the session's
/// announcement by ringing it again (the invite and the caller's trickle so far), as it does for
/// every new session; a node that takes a call over sends its ring and its accept again
/// (`CallRouter.catchUp`). Only the copies differ, never the messages: an invite or an accept
/// for a call, or a candidate of a call from one device and leg (with its username fragment),
/// that the session already got is never news.
package enum OnceKey {
  package static func of(_ message: ServerMessage) -> String? {
    switch message {
    case .invite(let m): return "i\u{0}" + m.callId
    case .accept(let m): return "a\u{0}" + m.callId
    case .candidate(let m):
      // An ICE restart's candidates may repeat a line under a new username fragment.
      // The parts' UTF-8 copied into the key's own storage, sized first: appending seven strings
      // to a `String` cost about 5,000 instructions a key (each append checks and grows the
      // string), and a node makes one for every relayed candidate and every copy of it
      // (docs/benchmarks.md, "Item 4, thirteenth step"). The same key, byte for byte.
      let c = m.candidate
      let (mid, fragment) = (c.sdpMid ?? "", c.usernameFragment ?? "")
      // One call per part (no array of them, which would be allocated per key).
      func eachPart(_ body: (String) -> Void) {
        body(m.callId)
        body(m.from.userId)
        body(m.from.deviceId)
        body(m.leg ? "leg" : "")
        body(c.candidate)
        body(mid)
        body(fragment)
      }
      var size = 1
      eachPart { size += 1 + $0.utf8.count }
      return String(unsafeUninitializedCapacity: size) { key in
        key[0] = UInt8(ascii: "c")
        var end = 1
        eachPart { part in
          key[end] = 0
          end += 1
          // A native string's UTF-8 is copied whole: a byte at a time cost about 2,800 more a key.
          let copied = part.utf8.withContiguousStorageIfAvailable { bytes in
            UnsafeMutableBufferPointer(rebasing: key[end...]).initialize(fromContentsOf: bytes)
          }
          if let copied {
            end += copied
          } else {
            for byte in part.utf8 {
              key[end] = byte
              end += 1
            }
          }
        }
        return end
      }
    default: return nil
    }
  }
}
