/// RFC 6455 framing for server-to-client frames (§5.2), so that several frames can leave in one
/// socket write. Server frames are never masked.
enum WebSocketFrame {
  static let text: UInt8 = 0x1
  static let binary: UInt8 = 0x2
  static let close: UInt8 = 0x8
  static let ping: UInt8 = 0x9
  static let pong: UInt8 = 0xA
  /// FIN + opcode, then a 64-bit length (no mask).
  static let maxHeaderLength = 10

  /// Writes the header of a final frame into `target` (room for `maxHeaderLength` bytes);
  /// returns its length.
  static func writeHeader(opcode: UInt8, count: Int, into target: UnsafeMutableRawPointer) -> Int {
    target.storeBytes(of: 0x80 | opcode, as: UInt8.self)
    if count < 126 {
      target.storeBytes(of: UInt8(count), toByteOffset: 1, as: UInt8.self)
      return 2
    }
    if count <= 0xFFFF {
      target.storeBytes(of: 126, toByteOffset: 1, as: UInt8.self)
      target.storeBytes(of: UInt8(count >> 8), toByteOffset: 2, as: UInt8.self)
      target.storeBytes(of: UInt8(count & 0xFF), toByteOffset: 3, as: UInt8.self)
      return 4
    }
    target.storeBytes(of: 127, toByteOffset: 1, as: UInt8.self)
    for index in 0..<8 {
      target.storeBytes(
        of: UInt8((UInt64(count) >> UInt64(56 - 8 * index)) & 0xFF), toByteOffset: 2 + index, as: UInt8.self)
    }
    return 10
  }

  static func appendHeader(opcode: UInt8, count: Int, to buffer: inout [UInt8]) {
    withUnsafeTemporaryAllocation(byteCount: maxHeaderLength, alignment: 1) { scratch in
      guard let base = scratch.baseAddress else { return }
      let length = writeHeader(opcode: opcode, count: count, into: base)
      buffer.append(contentsOf: UnsafeRawBufferPointer(start: base, count: length))
    }
  }

  /// A close frame's payload (§5.5.1): the code, then at most 123 bytes of reason; empty without a code.
  static func closePayload(code: UInt16?, reason: [UInt8]) -> [UInt8] {
    guard let code else { return [] }
    var kept = Array(reason.prefix(123))
    // Never a character cut in half: the peer would fail the connection with 1007.
    var check = UTF8Validator()
    while !kept.isEmpty, !(check.consume(kept) && check.isComplete) {
      kept.removeLast()
      check = UTF8Validator()
    }
    return [UInt8(code >> 8), UInt8(code & 0xFF)] + kept
  }

  /// Appends one final (unfragmented) text or binary frame carrying `payload` to `buffer`.
  static func append(_ payload: [UInt8], binary: Bool, to buffer: inout [UInt8]) {
    buffer.append(binary ? 0x82 : 0x81)
    let count = payload.count
    if count < 126 {
      buffer.append(UInt8(count))
    } else if count <= 0xFFFF {
      buffer.append(126)
      buffer.append(UInt8(count >> 8))
      buffer.append(UInt8(count & 0xFF))
    } else {
      buffer.append(127)
      for shift in stride(from: 56, through: 0, by: -8) {
        buffer.append(UInt8((UInt64(count) >> UInt64(shift)) & 0xFF))
      }
    }
    buffer.append(contentsOf: payload)
  }
}
