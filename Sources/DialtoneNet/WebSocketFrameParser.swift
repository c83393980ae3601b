/// Reads what a WebSocket client sends (RFC 6455 §5), as a server must: frames arrive in pieces
/// of any size, each is checked as soon as its bytes allow, and messages are reassembled from
/// fragments up to a size limit. It returns one event at a time, so the caller can act on a
/// message (close the socket, say) before the next frame is read.
///
/// What fails the connection, and with which code (§7.4.1):
/// - 1002: an unmasked frame (§5.1), reserved bits without an extension (§5.2), a reserved
///   opcode, a control frame over 125 bytes or fragmented (§5.5), a continuation with no message
///   to continue or a new message inside a fragmented one (§5.4), a 64-bit length with its top
///   bit set, a close payload of one byte, an invalid close code (§7.4);
/// - 1007: text or a close reason that is not UTF-8, at the first invalid byte (§8.1);
/// - 1009: a message over `maxMessageBytes`, as soon as a frame header says so: nothing of it
///   is delivered.
package struct WebSocketFrameParser {
  package enum Event: Equatable, Sendable {
    case message([UInt8], isText: Bool)
    case ping([UInt8])
    case pong
    /// The peer's close frame: its code (nil when the payload was empty) and reason.
    case close(code: UInt16?, reason: [UInt8])
    /// The connection must fail with `code`; nothing after this is read.
    case failure(code: UInt16, reason: String)
  }

  let maxMessageBytes: Int
  /// Set once this side has closed (`discardData`): data frames are then skipped unread
  /// (neither kept nor checked), control frames still parsed, so that the peer's close frame
  /// can be recognised.
  private(set) var discardingData = false

  // The frame in progress.
  private var header: [UInt8] = []
  private var inFrame = false
  private var opcode: UInt8 = 0
  private var fin = false
  private var remaining = 0
  private var maskKey: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
  /// Payload bytes of the current frame already read (the mask's phase).
  private var position = 0
  private var control: [UInt8] = []
  // The message in progress (fragmented, or bigger than one read).
  private var message: [UInt8] = []
  private var messageIsText: Bool?
  private var text = UTF8Validator()
  /// A close or a failure was returned: everything after it is ignored.
  private(set) var finished = false

  package init(maxMessageBytes: Int) {
    self.maxMessageBytes = maxMessageBytes
  }

  /// Whether a partly received frame or message is held (its buffers are freed when it ends).
  var isIdle: Bool { !inFrame && header.isEmpty && messageIsText == nil }

  /// From now on data frames are skipped (this side has closed); a message in progress is dropped.
  package mutating func discardData() {
    discardingData = true
    message = []
    messageIsText = nil
  }

  private static let close: UInt8 = 0x8
  private static let ping: UInt8 = 0x9
  private static let pong: UInt8 = 0xA

  /// The next event in `input` from `index` on (advanced past what was read), or nil when
  /// `input` is used up without completing one.
  package mutating func next(_ input: UnsafeRawBufferPointer, _ index: inout Int) -> Event? {
    var room: [UInt8] = []
    return next(input, &index, room: &room)
  }

  /// `next`, with the array a whole message that arrived in one read is delivered in: `room`'s
  /// storage is reused when nothing kept the previous message delivered in it (the caller's
  /// receiver let it go), so such a message costs no allocation; otherwise a new one is made
  /// (copy-on-write), and what was kept is untouched.
  package mutating func next(_ input: UnsafeRawBufferPointer, _ index: inout Int, room: inout [UInt8]) -> Event? {
    guard let base = input.baseAddress else { return nil }
    while !finished {
      if !inFrame {
        switch readHeader(base, input.count, &index) {
        case .needMore: return nil
        case .failed(let event): return fail(event)
        case .ready: break
        }
        if remaining == 0, let event = endFrame() { return event }
        continue
      }
      let available = input.count - index
      guard available > 0 else { return nil }
      let count = min(remaining, available)
      let source = UnsafeRawBufferPointer(start: base + index, count: count)
      index += count
      if let event = payload(source, room: &room) { return event }
    }
    index = input.count
    return nil
  }

  // MARK: - Header

  private enum HeaderResult {
    case needMore, ready
    case failed(Event)
  }

  private mutating func readHeader(_ base: UnsafeRawPointer, _ count: Int, _ index: inout Int) -> HeaderResult {
    // Most headers arrive whole: read them in place. Otherwise collect the pieces.
    if header.isEmpty, count - index >= 2 {
      let first = base.load(fromByteOffset: index, as: UInt8.self)
      let second = base.load(fromByteOffset: index + 1, as: UInt8.self)
      if let failure = check(first: first) ?? check(second: second) { return .failed(failure) }
      let length = Self.headerLength(second)
      if count - index >= length {
        let bytes = UnsafeRawBufferPointer(start: base + index, count: length)
        index += length
        return begin(bytes)
      }
    }
    while index < count {
      let byte = base.load(fromByteOffset: index, as: UInt8.self)
      index += 1
      if header.isEmpty {
        if let failure = check(first: byte) { return .failed(failure) }
        header.reserveCapacity(14)
      } else if header.count == 1, let failure = check(second: byte) {
        return .failed(failure)
      }
      header.append(byte)
      if header.count >= 2, header.count == Self.headerLength(header[1]) {
        let collected = header
        header = []
        return collected.withUnsafeBytes { begin($0) }
      }
    }
    return .needMore
  }

  private static func headerLength(_ second: UInt8) -> Int {
    let short = second & 0x7F
    return 2 + (short == 126 ? 2 : short == 127 ? 8 : 0) + 4
  }

  /// FIN, RSV1–3 and the opcode.
  private func check(first: UInt8) -> Event? {
    if first & 0x70 != 0 { return .failure(code: 1002, reason: "reserved bits set") }
    let opcode = first & 0x0F
    switch opcode {
    case 0x0, 0x1, 0x2:
      guard !discardingData else { return nil }
      if opcode == 0, messageIsText == nil { return .failure(code: 1002, reason: "continuation without a message") }
      if opcode != 0, messageIsText != nil {
        return .failure(code: 1002, reason: "new message inside a fragmented one")
      }
      return nil
    case Self.close, Self.ping, Self.pong:
      return first & 0x80 == 0 ? .failure(code: 1002, reason: "fragmented control frame") : nil
    default:
      return .failure(code: 1002, reason: "reserved opcode")
    }
  }

  /// MASK and the 7-bit length.
  private func check(second: UInt8) -> Event? {
    if second & 0x80 == 0 { return .failure(code: 1002, reason: "unmasked frame") }
    return nil
  }

  private mutating func begin(_ bytes: UnsafeRawBufferPointer) -> HeaderResult {
    let first = bytes[0]
    opcode = first & 0x0F
    fin = first & 0x80 != 0
    let short = Int(bytes[1] & 0x7F)
    var offset = 2
    var length: UInt64
    switch short {
    case 126:
      length = UInt64(bytes[2]) << 8 | UInt64(bytes[3])
      offset = 4
    case 127:
      length = 0
      for i in 2..<10 { length = length << 8 | UInt64(bytes[i]) }
      offset = 10
      if length >> 63 != 0 { return .failed(.failure(code: 1002, reason: "frame length over 2^63")) }
    default:
      length = UInt64(short)
    }
    if opcode >= Self.close, length > 125 {
      return .failed(.failure(code: 1002, reason: "control frame over 125 bytes"))
    }
    if opcode < Self.close, !discardingData, UInt64(message.count) + length > UInt64(maxMessageBytes) {
      return .failed(.failure(code: 1009, reason: "message too big"))
    }
    maskKey = (bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3])
    remaining = Int(length)
    position = 0
    inFrame = true
    if opcode != 0, opcode < Self.close, !discardingData {
      // The first frame of a message.
      messageIsText = opcode == 0x1
      text = UTF8Validator()
    }
    return .ready
  }

  // MARK: - Payload

  /// Reads `source`, the next slice of the current frame's payload; an event when the frame
  /// (or the connection) ends with it.
  private mutating func payload(_ source: UnsafeRawBufferPointer, room: inout [UInt8]) -> Event? {
    let count = source.count
    let isLast = count == remaining
    if opcode >= Self.close {
      let start = control.count
      control.append(contentsOf: source.bytes)
      let (key, position) = (maskKey, position)
      control.withUnsafeMutableBytes { buffer in
        guard let target = buffer.baseAddress else { return }
        Self.unmask(
          UnsafeRawBufferPointer(start: target + start, count: count), into: target + start, key: key,
          position: position)
      }
    } else if !discardingData {
      let isText = messageIsText ?? false
      // A whole unfragmented message in this read goes straight into the array delivered: the
      // caller's room (unmasked in place there).
      if fin, message.isEmpty, position == 0, isLast {
        // Keeps the storage when the room is the only owner, else starts a new one.
        room.removeAll(keepingCapacity: true)
        room.append(contentsOf: source.bytes)
        let key = maskKey
        room.withUnsafeMutableBytes { buffer in
          guard let target = buffer.baseAddress else { return }
          Self.unmask(UnsafeRawBufferPointer(buffer), into: target, key: key, position: 0)
        }
        let bytes = room
        if isText, !(bytes.withUnsafeBytes { text.consume($0) } && text.isComplete) {
          return fail(.failure(code: 1007, reason: "text is not UTF-8"))
        }
        remaining = 0
        inFrame = false
        messageIsText = nil
        return .message(bytes, isText: isText)
      }
      let start = message.count
      if start == 0 { message.reserveCapacity(min(maxMessageBytes, remaining)) }
      message.append(contentsOf: source.bytes)
      let (key, position) = (maskKey, position)
      var validator = text
      let valid = message.withUnsafeMutableBytes { buffer -> Bool in
        guard let base = buffer.baseAddress else { return true }
        let slice = UnsafeRawBufferPointer(start: base + start, count: count)
        Self.unmask(slice, into: base + start, key: key, position: position)
        return !isText || validator.consume(UnsafeRawBufferPointer(start: base + start, count: count))
      }
      text = validator
      if !valid { return fail(.failure(code: 1007, reason: "text is not UTF-8")) }
    }
    remaining -= count
    position += count
    return isLast ? endFrame() : nil
  }

  private mutating func endFrame() -> Event? {
    inFrame = false
    switch opcode {
    case Self.close:
      let payload = control
      control = []
      return closeFrame(payload)
    case Self.ping:
      let payload = control
      control = []
      return .ping(payload)
    case Self.pong:
      control = []
      return .pong
    default:
      guard fin, !discardingData, let isText = messageIsText else { return nil }
      if isText, !text.isComplete { return fail(.failure(code: 1007, reason: "text is not UTF-8")) }
      let whole = message
      message = []
      messageIsText = nil
      return .message(whole, isText: isText)
    }
  }

  private mutating func closeFrame(_ payload: [UInt8]) -> Event {
    finished = true
    if payload.isEmpty { return .close(code: nil, reason: []) }
    guard payload.count >= 2 else { return .failure(code: 1002, reason: "close payload of one byte") }
    let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
    guard WebSocketCloseCode.isValidFromPeer(code) else { return .failure(code: 1002, reason: "invalid close code") }
    let reason = Array(payload[2...])
    var check = UTF8Validator()
    guard check.consume(reason), check.isComplete else {
      return .failure(code: 1007, reason: "close reason is not UTF-8")
    }
    return .close(code: code, reason: reason)
  }

  private mutating func fail(_ event: Event) -> Event {
    finished = true
    header = []
    control = []
    message = []
    return event
  }

  /// XORs `source` with the mask key at the current frame position, eight bytes at a time.
  private static func unmask(
    _ source: UnsafeRawBufferPointer, into target: UnsafeMutableRawPointer, key maskKey: (UInt8, UInt8, UInt8, UInt8),
    position: Int
  ) {
    guard let from = source.baseAddress else { return }
    let count = source.count
    // Byte i of `rotated` is the key byte for payload position `position + i`.
    var rotated: UInt64 = 0
    withUnsafeBytes(of: maskKey) { key in
      withUnsafeMutableBytes(of: &rotated) { bytes in
        for i in 0..<8 { bytes[i] = key[(position + i) & 3] }
      }
    }
    var index = 0
    while index + 8 <= count {
      let word = from.loadUnaligned(fromByteOffset: index, as: UInt64.self) ^ rotated
      target.storeBytes(of: word, toByteOffset: index, as: UInt64.self)
      index += 8
    }
    withUnsafeBytes(of: rotated) { key in
      while index < count {
        let byte = from.load(fromByteOffset: index, as: UInt8.self) ^ key[index & 7]
        target.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
        index += 1
      }
    }
  }
}

extension UnsafeRawBufferPointer {
  /// The same bytes, typed: `Array.append(contentsOf:)` copies those in one piece (a raw buffer
  /// is appended byte by byte).
  var bytes: UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: baseAddress?.assumingMemoryBound(to: UInt8.self), count: count)
  }
}
