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
      var runStart = 0
      for index in utf8.indices {
        let byte = utf8[index]
        guard Self.needsEscape(byte) else { continue }
        // Copy the unescaped run before this byte at once, then the escape.
        if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
        runStart = index + 1
        bytes.append(UInt8(ascii: "\\"))
        if let letter = Self.shortEscape(byte) {
          bytes.append(letter)
        } else {
          bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
          bytes.append(Self.hexDigits[Int(byte >> 4)])
          bytes.append(Self.hexDigits[Int(byte & 0x0F)])
        }
      }
      if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  /// Whether a string's byte is written escaped: a control character, a quote or a backslash.
  @inline(__always)
  static func needsEscape(_ byte: UInt8) -> Bool {
    byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
  }

  /// The letter after the backslash of a two-byte escape; nil for one written `\u00XX`.
  @inline(__always)
  static func shortEscape(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "\""): UInt8(ascii: "\"")
    case UInt8(ascii: "\\"): UInt8(ascii: "\\")
    case 0x0A: UInt8(ascii: "n")
    case 0x0D: UInt8(ascii: "r")
    case 0x09: UInt8(ascii: "t")
    case 0x08: UInt8(ascii: "b")
    case 0x0C: UInt8(ascii: "f")
    default: nil
    }
  }
}

// MARK: - Writing into memory sized beforehand

extension JSONWriter {
  /// How many bytes `writeString` writes for a string of these UTF-8 bytes, quotes included:
  /// a frame written with `writeQuoted` is sized with it first, exactly.
  public static func quotedByteCount(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
    var count = utf8.count + 2
    for byte in utf8 where needsEscape(byte) { count += shortEscape(byte) == nil ? 5 : 1 }
    return count
  }

  /// Writes at `out` exactly the bytes `writeString` appends for a string of these UTF-8 bytes
  /// (the same escapes), into memory the caller sized with `quotedByteCount`; returns the end.
  /// Unescaped runs are copied at once, with no array's uniqueness and capacity checks per
  /// append (a relayed frame is a dozen of them).
  public static func writeQuoted(_ utf8: UnsafeBufferPointer<UInt8>, at out: UnsafeMutablePointer<UInt8>)
    -> UnsafeMutablePointer<UInt8>
  {
    var at = out
    at.initialize(to: UInt8(ascii: "\""))
    at += 1
    guard let base = utf8.baseAddress else {
      at.initialize(to: UInt8(ascii: "\""))
      return at + 1
    }
    var runStart = 0
    for index in 0..<utf8.count {
      let byte = base[index]
      guard needsEscape(byte) else { continue }
      if runStart < index {
        at.initialize(from: base + runStart, count: index - runStart)
        at += index - runStart
      }
      runStart = index + 1
      at.initialize(to: UInt8(ascii: "\\"))
      if let letter = shortEscape(byte) {
        at[1] = letter
        at += 2
      } else {
        at[1] = UInt8(ascii: "u")
        at[2] = UInt8(ascii: "0")
        at[3] = UInt8(ascii: "0")
        at[4] = hexDigits[Int(byte >> 4)]
        at[5] = hexDigits[Int(byte & 0x0F)]
        at += 6
      }
    }
    if runStart < utf8.count {
      at.initialize(from: base + runStart, count: utf8.count - runStart)
      at += utf8.count - runStart
    }
    at.initialize(to: UInt8(ascii: "\""))
    return at + 1
  }

  /// How many bytes `writeInteger` writes for `number`.
  public static func integerByteCount(_ number: Int64) -> Int {
    var magnitude = number.magnitude
    var count = number < 0 ? 2 : 1
    while magnitude >= 10 {
      magnitude /= 10
      count += 1
    }
    return count
  }

  /// Writes at `out` exactly the bytes `writeInteger` appends (`integerByteCount` of them);
  /// returns the end.
  public static func writeInteger(_ number: Int64, at out: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
    var at = out
    if number < 0 {
      at.initialize(to: UInt8(ascii: "-"))
      at += 1
    }
    let count = integerByteCount(number) - (number < 0 ? 1 : 0)
    var magnitude = number.magnitude
    for position in stride(from: count - 1, through: 0, by: -1) {
      (at + position).initialize(to: UInt8(ascii: "0") + UInt8(magnitude % 10))
      magnitude /= 10
    }
    return at + count
  }
}
