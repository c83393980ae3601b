/// RFC 6455 framing for server-to-client data frames, so that several frames can leave in one
/// socket write (lws frames one message per write). Server frames are never masked.
enum WebSocketFrame {
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
