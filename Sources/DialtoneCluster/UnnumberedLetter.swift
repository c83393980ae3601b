import DialtoneJSON

/// A message another node left in this node's inbox for a session this node holds under
/// write-behind (`WriteBehindShell`): unnumbered, since only the holder numbers its sessions
/// (docs/architecture.md, write-behind, point 1). `SessionLedger`'s append step writes it in Lua,
/// so its header holds only the session id (ids never hold a quote or backslash) and lengths:
/// `{"k":"unnumbered","s":"<session>","r":<request id bytes>,"h":<head bytes>}`, a newline, then
/// the request id ('' for none), the frame's head and its tail (`SessionLedger.Frame`).
package struct UnnumberedLetter: Sendable, Equatable {
  package let session: String
  package let frame: SessionLedger.Frame
  package let requestID: String?

  package init(session: String, frame: SessionLedger.Frame, requestID: String?) {
    self.session = session
    self.frame = frame
    self.requestID = requestID
  }

  static let prefix = Array(#"{"k":"unnumbered","#.utf8)

  /// Nil for any other kind of letter; throws for an unnumbered letter that does not decode.
  package static func decode(_ bytes: [UInt8]) throws(ClusterLetterCodec.Malformed) -> UnnumberedLetter? {
    guard bytes.starts(with: prefix) else { return nil }
    guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")),
      let header = JSONValue(parsing: bytes[..<newline]), let session = header["s"]?.stringValue,
      let requestLength = header["r"]?.intValue, let headLength = header["h"]?.intValue,
      requestLength >= 0, headLength >= 0, bytes.count - newline - 1 >= requestLength + headLength
    else { throw ClusterLetterCodec.Malformed(description: "an unnumbered letter without its header") }
    let start = newline + 1
    let request = String(decoding: bytes[start..<(start + requestLength)], as: UTF8.self)
    let head = Array(bytes[(start + requestLength)..<(start + requestLength + headLength)])
    let tail = Array(bytes[(start + requestLength + headLength)...])
    return UnnumberedLetter(
      session: session, frame: .init(head: head, tail: tail), requestID: request.isEmpty ? nil : request)
  }

  /// As the append step writes it (tests, and a letter built in Swift).
  package var encoded: [UInt8] {
    let request = Array((requestID ?? "").utf8)
    let header = #"{"k":"unnumbered","s":"\#(session)","r":\#(request.count),"h":\#(frame.head.count)}"#
    return Array(header.utf8) + [UInt8(ascii: "\n")] + request + frame.head + frame.tail
  }
}
