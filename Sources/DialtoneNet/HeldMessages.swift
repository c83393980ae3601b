/// The messages a socket holds back to share a write with the next one (`sendCoalesced`), kept
/// as the arrays they came in, unframed. The array is the one the delivery session keeps for a
/// resume, so holding a message copies nothing and allocates nothing; it is framed only when it
/// leaves, straight into the loop's send buffer together with the message it waited for. A
/// second message held before the first left (rare: the first usually waits for a reply in the
/// other direction) goes to `more`.
struct HeldMessages {
  private var first: (bytes: [UInt8], binary: Bool)?
  private var more: [(bytes: [UInt8], binary: Bool)] = []
  /// Their size once framed: what they add to the socket's queued bytes.
  private(set) var framedBytes = 0

  var isEmpty: Bool { first == nil }

  mutating func append(_ bytes: [UInt8], binary: Bool) {
    if first == nil { first = (bytes, binary) } else { more.append((bytes, binary)) }
    framedBytes += Self.headerLength(bytes.count) + bytes.count
  }

  /// Frames them, in order, at `target` (room for `framedBytes`); returns the bytes written.
  func frame(into target: UnsafeMutableRawPointer) -> Int {
    guard let first else { return 0 }
    var end = Self.frame(first.bytes, binary: first.binary, into: target)
    for message in more { end += Self.frame(message.bytes, binary: message.binary, into: target + end) }
    return end
  }

  /// Them framed in an array of their own, with room for `extra` bytes more (for the queue).
  func framed(reserving extra: Int = 0) -> [UInt8] {
    var frames: [UInt8] = []
    frames.reserveCapacity(framedBytes + extra)
    if let first { WebSocketFrame.append(first.bytes, binary: first.binary, to: &frames) }
    for message in more { WebSocketFrame.append(message.bytes, binary: message.binary, to: &frames) }
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
