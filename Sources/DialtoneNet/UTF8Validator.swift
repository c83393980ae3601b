/// Checks UTF-8 (RFC 3629) as it arrives, piece by piece, and fails at the first byte that cannot
/// belong to valid text: a text message or close reason split over frames or reads is judged
/// without waiting for its end (RFC 6455 §8.1). Overlong forms, surrogates (U+D800–U+DFFF) and
/// code points above U+10FFFF are invalid.
struct UTF8Validator: Equatable {
  /// Continuation bytes still owed by the character in progress (0: between characters).
  private var owed: UInt8 = 0
  /// The range the next continuation byte must fall in: narrower than 80–BF right after a lead
  /// byte whose second byte is restricted (E0, ED, F0, F4).
  private var low: UInt8 = 0x80
  private var high: UInt8 = 0xBF

  /// True between characters: a message that ends here is complete text.
  var isComplete: Bool { owed == 0 }

  /// Feeds the next bytes; false at the first invalid one (the validator is then spent).
  mutating func consume(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    let count = bytes.count
    var index = 0
    while index < count {
      if owed == 0 {
        // ASCII runs, eight bytes at a time: JSON signaling is almost all ASCII.
        while index + 8 <= count,
          base.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
        {
          index += 8
        }
        guard index < count else { break }
        let byte = base.load(fromByteOffset: index, as: UInt8.self)
        index += 1
        if byte < 0x80 { continue }
        guard start(byte) else { return false }
      } else {
        let byte = base.load(fromByteOffset: index, as: UInt8.self)
        index += 1
        guard byte >= low, byte <= high else { return false }
        owed -= 1
        low = 0x80
        high = 0xBF
      }
    }
    return true
  }

  mutating func consume(_ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { consume($0) }
  }

  /// A lead byte: how many continuation bytes follow, and the range of the first one.
  private mutating func start(_ byte: UInt8) -> Bool {
    switch byte {
    case 0xC2...0xDF: owed = 1
    case 0xE0:
      owed = 2
      low = 0xA0
    case 0xE1...0xEC, 0xEE...0xEF: owed = 2
    case 0xED:
      owed = 2
      high = 0x9F
    case 0xF0:
      owed = 3
      low = 0x90
    case 0xF1...0xF3: owed = 3
    case 0xF4:
      owed = 3
      high = 0x8F
    default: return false  // 80–C1 (continuation or overlong), F5–FF
    }
    return true
  }
}
