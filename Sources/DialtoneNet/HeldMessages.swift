/// The messages a socket holds back to share a write with the next one (`sendCoalesced`), kept
/// as the arrays they came in, unframed. The array is the one the delivery session keeps for a
/// resume, so holding a message copies nothing and allocates nothing; it is framed only when it
/// leaves, straight into the loop's send buffer together with the message it waited for. A
/// second message held before the first left (rare: the first usually waits for a reply in the
/// other direction) makes them `several`.
struct HeldMessages {
  /// One word, as the framed array it replaced: every socket has one, held or not, and a wider
  /// field cost idle sockets 0.05 KB each (`bench-ws`).
  private enum Held {
    case none
    /// The usual holding: one text message.
    case text([UInt8])
    case several([(bytes: [UInt8], binary: Bool)])
  }
  private var held = Held.none

  var isEmpty: Bool {
    if case .none = held { return true }
    return false
  }

  /// Their size once framed: what they add to the socket's queued bytes.
  var framedBytes: Int {
    switch held {
    case .none: return 0
    case .text(let bytes): return Self.headerLength(bytes.count) + bytes.count
    case .several(let messages): return messages.reduce(0) { $0 + Self.headerLength($1.bytes.count) + $1.bytes.count }
    }
  }

  mutating func append(_ bytes: [UInt8], binary: Bool) {
    switch held {
    case .none: held = binary ? .several([(bytes, true)]) : .text(bytes)
    case .text(let first): held = .several([(first, false), (bytes, binary)])
    case .several(var messages):
      held = .none  // the array is then uniquely referenced: appended in place
      messages.append((bytes, binary))
      held = .several(messages)
    }
  }

  private var messages: [(bytes: [UInt8], binary: Bool)] {
    switch held {
    case .none: return []
    case .text(let bytes): return [(bytes, false)]
    case .several(let messages): return messages
    }
  }

  /// Frames them, in order, at `target` (room for `framedBytes`); returns the bytes written.
  func frame(into target: UnsafeMutableRawPointer) -> Int {
    switch held {
    case .none: return 0
    case .text(let bytes): return Self.frame(bytes, binary: false, into: target)
    case .several(let messages):
      var end = 0
      for message in messages { end += Self.frame(message.bytes, binary: message.binary, into: target + end) }
      return end
    }
  }

  /// Them framed in an array of their own, with room for `extra` bytes more (for the queue).
  func framed(reserving extra: Int = 0) -> [UInt8] {
    var frames: [UInt8] = []
    frames.reserveCapacity(framedBytes + extra)
    for message in messages { WebSocketFrame.append(message.bytes, binary: message.binary, to: &frames) }
    return frames
  }

  /// One final frame of `bytes` at `target`; returns its length.
  static func frame(_ bytes: [UInt8], binary: Bool, into target: UnsafeMutableRawPointer) -> Int {
    let header = WebSocketFrame.writeHeader(
      opcode: binary ? WebSocketFrame.binary : WebSocketFrame.text, count: bytes.count, into: target)
    bytes.withUnsafeBytes { payload in
      if let source = payload.baseAddress { (target + header).copyMemory(from: source, byteCount: payload.count) }
    }
    return header + bytes.count
  }

  private static func headerLength(_ count: Int) -> Int { count < 126 ? 2 : count <= 0xFFFF ? 4 : 10 }
}
