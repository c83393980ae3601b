import DialtoneTestSupport
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A peer that completes the WebSocket handshake and then goes silent: it never answers pings,
/// like a phone that lost its network without closing the socket.
struct RawWebSocket {
  let fd: Int32

  static func handshake(port: Int) throws -> RawWebSocket {
    guard let fd = connectLoopback(port: port) else { throw TimeoutError(what: "raw connect") }
    let request =
      "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = recv(fd, &buffer, buffer.count, 0)
    guard count > 0, String(decoding: buffer.prefix(count), as: UTF8.self).contains("101") else {
      throw TimeoutError(what: "upgrade response")
    }
    return RawWebSocket(fd: fd)
  }

  func close() { Glibc.close(fd) }

  /// One frame as a client sends it (masked), with any header bits a test wants wrong.
  static func frame(opcode: UInt8, payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0) -> [UInt8] {
    let mask: [UInt8] = [0x37, 0xfa, 0x21, 0x3d]
    var frame: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 0x70) | (opcode & 0x0f)]
    if payload.count < 126 {
      frame.append(0x80 | UInt8(payload.count))
    } else {
      frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
    }
    frame += mask
    frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    return frame
  }

  /// A close frame's payload: the status code, then the reason bytes.
  static func closePayload(_ code: UInt16, _ reason: [UInt8] = []) -> [UInt8] {
    [UInt8(code >> 8), UInt8(code & 0xff)] + reason
  }

  func write(_ bytes: [UInt8]) {
    _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
  }

  /// A frame from the server (unmasked, as servers send them).
  struct Frame: Equatable {
    let opcode: UInt8
    let payload: [UInt8]

    /// The status code of a close frame.
    var closeCode: UInt16? {
      guard opcode == 0x8, payload.count >= 2 else { return nil }
      return UInt16(payload[0]) << 8 | UInt16(payload[1])
    }
  }

  /// The frames the server sends until it closes the connection or is quiet for `seconds`
  /// (at most `limit` frames).
  func readFrames(seconds: Int = 3, limit: Int = 16) -> [Frame] {
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var bytes: [UInt8] = []
    var frames: [Frame] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while frames.count < limit {
      if let (frame, used) = Self.parse(bytes) {
        frames.append(frame)
        bytes.removeFirst(used)
        if frame.opcode == 0x8 { break }
        continue
      }
      let count = recv(fd, &chunk, chunk.count, 0)
      guard count > 0 else { break }
      bytes += chunk.prefix(count)
    }
    return frames
  }

  private static func parse(_ bytes: [UInt8]) -> (Frame, Int)? {
    guard bytes.count >= 2 else { return nil }
    var length = Int(bytes[1] & 0x7f)
    var offset = 2
    if length == 126 {
      guard bytes.count >= 4 else { return nil }
      length = Int(bytes[2]) << 8 | Int(bytes[3])
      offset = 4
    } else if length == 127 {
      guard bytes.count >= 10 else { return nil }
      length = bytes[2..<10].reduce(0) { $0 << 8 | Int($1) }
      offset = 10
    }
    guard bytes.count >= offset + length else { return nil }
    return (Frame(opcode: bytes[0] & 0x0f, payload: Array(bytes[offset..<offset + length])), offset + length)
  }
}
