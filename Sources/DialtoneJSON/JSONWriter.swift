// memcmp: this module imports no Foundation, so it takes libc from the platform's module.
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Compact JSON output: whole `JSONValue` trees (object keys sorted byte-wise) and the
/// primitives typed encoders write with (strings escaped per RFC 8259, integers, literals).
public struct JSONWriter {
  public var bytes: [UInt8] = []

  public init(capacity: Int = 256) {
    bytes.reserveCapacity(capacity)
  }

  public mutating func write(_ value: JSONValue) {
    switch value {
    case .null:
      append("null")
    case .bool(let flag):
      append(flag ? "true" : "false")
    case .int(let number):
      writeInteger(number)
    case .double(let number):
      if number.isFinite {
        // Swift's shortest round-trip representation ("1.5", "1e+20", "5e-324") is valid JSON.
        bytes.append(contentsOf: "\(number)".utf8)
      } else {
        append("null")
      }
    case .string(let text):
      writeString(text)
    case .array(let elements):
      bytes.append(UInt8(ascii: "["))
      var first = true
      for element in elements {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        write(element)
      }
      bytes.append(UInt8(ascii: "]"))
    case .object(let members):
      bytes.append(UInt8(ascii: "{"))
      if members.count <= 32 {
        // Protocol objects are small: an insertion sort of the dictionary's indices in a stack
        // buffer re-hashes no key, copies no pair and allocates nothing. (An index is a plain
        // bucket number and age, so assigning into the uninitialised buffer is fine.)
        withUnsafeTemporaryAllocation(of: Dictionary<String, JSONValue>.Index.self, capacity: members.count) { order in
          var count = 0
          for index in members.indices {
            let key = members[index].key
            var slot = count
            while slot > 0, Self.utf8Precedes(key, members[order[slot - 1]].key) {
              order[slot] = order[slot - 1]
              slot -= 1
            }
            order[slot] = index
            count += 1
          }
          for position in 0..<count { writeMember(members[order[position]], first: position == 0) }
        }
      } else {
        for (position, pair) in members.sorted(by: { Self.utf8Precedes($0.key, $1.key) }).enumerated() {
          writeMember(pair, first: position == 0)
        }
      }
      bytes.append(UInt8(ascii: "}"))
    }
  }

  private mutating func writeMember(_ member: (key: String, value: JSONValue), first: Bool) {
    if !first { bytes.append(UInt8(ascii: ",")) }
    writeString(member.key)
    bytes.append(UInt8(ascii: ":"))
    write(member.value)
  }

  /// Byte-wise UTF-8 order; native strings compare with one memcmp instead of a generic
  /// element-by-element walk.
  public static func utf8Precedes(_ a: String, _ b: String) -> Bool {
    let fast: Bool? =
      a.utf8.withContiguousStorageIfAvailable { x in
        b.utf8.withContiguousStorageIfAvailable { y -> Bool in
          let common = min(x.count, y.count)
          if common > 0, let xb = x.baseAddress, let yb = y.baseAddress {
            let order = memcmp(xb, yb, common)
            if order != 0 { return order < 0 }
          }
          return x.count < y.count
        }
      } ?? nil
    return fast ?? a.utf8.lexicographicallyPrecedes(b.utf8)
  }

  /// Bytes written as they are: punctuation, literals, pre-escaped keys.
  public mutating func append(_ text: StaticString) {
    text.withUTF8Buffer { bytes.append(contentsOf: $0) }
  }

  public mutating func append(_ byte: UInt8) {
    bytes.append(byte)
  }

  public mutating func append(contentsOf other: some Sequence<UInt8>) {
    bytes.append(contentsOf: other)
  }

  public mutating func writeInteger(_ number: Int64) {
    if number == 0 {
      bytes.append(UInt8(ascii: "0"))
      return
    }
    if number < 0 { bytes.append(UInt8(ascii: "-")) }
    // Digits go into a stack buffer back to front, then in one append: reversing them in place
    // through `bytes[start...]` would copy that slice (copy-on-write) on every number.
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
      var magnitude = number.magnitude
      var start = 20
      while magnitude > 0 {
        start -= 1
        digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
        magnitude /= 10
      }
      bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
    }
  }

  private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

  public mutating func writeString(_ text: String) {
    bytes.append(UInt8(ascii: "\""))
    var text = text
    text.withUTF8 { utf8 in
      guard let base = utf8.baseAddress else { return }
      let count = utf8.count
      var runStart = 0
      var index = 0
      while true {
        index = PlainRunScan.end(base, from: index, count: count, stoppingAtNonASCII: false)
        guard index < count else { break }
        let byte = base[index]
        index += 1
        guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
        // Copy the unescaped run before this byte at once, then the escape.
        if runStart < index - 1 { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index - 1])) }
        runStart = index
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
          bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
          bytes.append(Self.hexDigits[Int(byte >> 4)])
          bytes.append(Self.hexDigits[Int(byte & 0x0F)])
        }
      }
      if runStart < count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  /// `text` quoted as `writeString` writes it, copied to `start` when no byte of it needs an
  /// escape and it fits before `end`: the position after its closing quote, or nil (then nothing
  /// is promised about the bytes from `start`). For frames written in one pass into memory
  /// reserved once, where per-piece appends cost more than the copies.
  public static func writePlainQuoted(
    _ text: String, at start: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>
  ) -> UnsafeMutablePointer<UInt8>? {
    let written: UnsafeMutablePointer<UInt8>?? = text.utf8.withContiguousStorageIfAvailable { utf8 in
      let count = utf8.count
      guard end - start >= count + 2 else { return nil }
      start.pointee = UInt8(ascii: "\"")
      if let base = utf8.baseAddress, count > 0 {
        var index = PlainRunScan.end(base, from: 0, count: count, stoppingAtNonASCII: false)
        while index < count {
          let byte = base[index]
          if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return nil }
          index += 1
        }
        (start + 1).update(from: base, count: count)
      }
      (start + 1 + count).pointee = UInt8(ascii: "\"")
      return start + 2 + count
    }
    return written ?? nil
  }
}
