/// The byte layout the node log's values share (`WriteBehindLogEntry`, `WriteBehindLogTrimmed`):
/// unsigned numbers as LEB128 varints, strings and byte strings as a varint length and the bytes.
/// Decoding never traps: what does not parse is `WriteBehindLogMalformed`.
struct WriteBehindLogWriter {
  private(set) var bytes: [UInt8] = []

  mutating func byte(_ value: UInt8) { bytes.append(value) }

  mutating func number(_ value: UInt64) {
    var rest = value
    while rest >= 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
      rest >>= 7
    }
    bytes.append(UInt8(rest))
  }

  mutating func data(_ value: some Collection<UInt8>) {
    number(UInt64(value.count))
    bytes.append(contentsOf: value)
  }

  mutating func text(_ value: String) { data(value.utf8) }
}

/// Reads what `WriteBehindLogWriter` wrote, from the front.
struct WriteBehindLogReader {
  private let bytes: [UInt8]
  private var at = 0

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  var isAtEnd: Bool { at == bytes.count }
  var remaining: Int { bytes.count - at }

  mutating func byte() throws(WriteBehindLogMalformed) -> UInt8 {
    guard at < bytes.count else { throw .truncated }
    defer { at += 1 }
    return bytes[at]
  }

  /// At most ten bytes, the last holding no more than 64 bits' worth.
  mutating func number() throws(WriteBehindLogMalformed) -> UInt64 {
    var value: UInt64 = 0
    for shift in stride(from: UInt64(0), to: 70, by: 7) {
      let next = try byte()
      let part = UInt64(next & 0x7f)
      guard shift < 63 || part <= 1 else { throw .numberTooLarge }
      value |= part << shift
      if next & 0x80 == 0 { return value }
    }
    throw .numberTooLarge
  }

  mutating func data() throws(WriteBehindLogMalformed) -> [UInt8] {
    let count = try number()
    guard count <= UInt64(remaining) else { throw .truncated }
    defer { at += Int(count) }
    return Array(bytes[at..<at + Int(count)])
  }

  mutating func text() throws(WriteBehindLogMalformed) -> String {
    let data = try data()
    guard let text = String(validating: data, as: UTF8.self) else { throw .notText }
    return text
  }
}

/// Why a node log value read back from Redis is not one: a bug or a foreign writer, reported,
/// never trusted.
package enum WriteBehindLogMalformed: Error, Sendable, Equatable {
  /// It ends inside a number, a string or a frame.
  case truncated
  /// A varint longer than 64 bits.
  case numberTooLarge
  /// A string that is not UTF-8.
  case notText
  /// A layout version this node does not read.
  case unknownVersion(UInt8)
  /// Bytes after the last frame or pair.
  case trailingBytes
  /// A checkpoint that is not "last" or "last letterPosition".
  case badCheckpoint(String)
}
