import DialtoneJSON

/// A message another node left in this node's inbox for a session this node holds under
/// write-behind (`WriteBehindShell`): unnumbered, since only the holder numbers its sessions
/// (docs/architecture.md, write-behind, point 1). `SessionLedger`'s append step writes it in Lua,
/// so its header holds only the session id (ids never hold a quote or backslash) and lengths:
/// `{"k":"unnumbered","s":"<session>","r":<request id bytes>,"o":<once-key bytes>,"h":<head
/// bytes>}`, a newline, then the request id ('' for none), the once-key ('' for none: `OnceKey`,
/// which the holder remembers so that a copy of the message it numbers itself later is a
/// repeat), the frame's head and its tail (`SessionLedger.Frame`).
package struct UnnumberedLetter: Sendable, Equatable {
  package let session: String
  package let frame: SessionLedger.Frame
  package let requestID: String?
  package let once: String?

  package init(session: String, frame: SessionLedger.Frame, requestID: String?, once: String? = nil) {
    self.session = session
    self.frame = frame
    self.requestID = requestID
    self.once = once
  }

  static let prefix = Array(#"{"k":"unnumbered","#.utf8)

  /// Nil for any other kind of letter; throws for an unnumbered letter that does not decode.
  package static func decode(_ bytes: [UInt8]) throws(ClusterLetterCodec.Malformed) -> UnnumberedLetter? {
    guard bytes.starts(with: prefix) else { return nil }
    guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")),
      let header = JSONValue(parsing: bytes[..<newline]), let session = header["s"]?.stringValue,
      let requestLength = header["r"]?.intValue, let headLength = header["h"]?.intValue,
      case let onceLength = header["o"]?.intValue ?? 0, requestLength >= 0, headLength >= 0, onceLength >= 0,
      bytes.count - newline - 1 >= requestLength + onceLength + headLength
    else { throw ClusterLetterCodec.Malformed(description: "an unnumbered letter without its header") }
    var at = newline + 1
    func take(_ count: Int) -> ArraySlice<UInt8> {
      defer { at += count }
      return bytes[at..<(at + count)]
    }
    let request = String(decoding: take(requestLength), as: UTF8.self)
    let once = String(decoding: take(onceLength), as: UTF8.self)
    let head = Array(take(headLength))
    let tail = Array(bytes[at...])
    return UnnumberedLetter(
      session: session, frame: .init(head: head, tail: tail), requestID: request.isEmpty ? nil : request,
      once: once.isEmpty ? nil : once)
  }

  /// As the append step writes it (tests, and a letter built in Swift).
  package var encoded: [UInt8] {
    let request = Array((requestID ?? "").utf8)
    let once = Array((once ?? "").utf8)
    let header =
      #"{"k":"unnumbered","s":"\#(session)","r":\#(request.count),"o":\#(once.count),"h":\#(frame.head.count)}"#
    return Array(header.utf8) + [UInt8(ascii: "\n")] + request + once + frame.head + frame.tail
  }
}
