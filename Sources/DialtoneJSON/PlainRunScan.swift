/// Where a run of string bytes that JSON carries as they are ends, found eight bytes at a time:
/// a string is mostly long runs without a quote, a backslash or a control character, and a word
/// at a time tests them in a few instructions where a byte at a time took a dozen per byte. The
/// parser and the writer share it; the parser also stops at a byte of 0x80 or above (it validates
/// UTF-8 apart), the writer copies those as they are.
enum PlainRunScan {
  /// The first byte from `index` that is a quote, a backslash, below 0x20 or (when
  /// `stoppingAtNonASCII`) 0x80 and above; or where fewer than eight bytes are left (those are
  /// for the caller to look at one by one).
  @inline(__always)
  static func end(_ base: UnsafePointer<UInt8>, from index: Int, count: Int, stoppingAtNonASCII: Bool) -> Int {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    var index = index
    while count - index >= 8 {
      let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
      let quote = word ^ (ones &* 0x22)
      let backslash = word ^ (ones &* 0x5C)
      // A zero byte in `quote` or `backslash`, or a byte below 0x20 (a byte with its high bit set
      // is flagged by `word` itself, or kept out by `~word`). Each test may also flag a byte after
      // the first one it finds (a borrow carried up), never one before it: the first flagged
      // byte is the first to stop at, and the scan steps straight to it.
      let control = word &- ones &* 0x20
      let special =
        ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
        | (stoppingAtNonASCII ? control | word : control & ~word)
      if special & highs != 0 { return index + (special & highs).trailingZeroBitCount >> 3 }
      index += 8
    }
    return index
  }
}
