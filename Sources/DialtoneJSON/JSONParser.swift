/// A strict RFC 8259 parser that writes a `JSONTape` instead of building values.
///
/// Strict means: no trailing commas, no comments, no leading zeros, no NaN/Infinity, no raw
/// control characters inside strings, well-formed UTF-8 only, no lone surrogate escapes,
/// no duplicate object keys, no numbers beyond the finite `Double` range, at most `maxDepth`
/// levels of nesting (deeply nested input must not be able to exhaust the stack), and nothing
/// but whitespace after the value.
///
/// Nothing is copied out of the input: a string is validated in place and recorded as a byte
/// range (decoded only when a reader asks for it), an integer is accumulated into its token.
struct JSONParser {
  private let bytes: UnsafeBufferPointer<UInt8>
  private let maxDepth: Int
  private var index = 0
  private var depth = 0
  /// The tokens written so far: `tokenCount` of them at `tokens`, in room for `capacity`. Written
  /// through a pointer, not appended to an array: an append checked the array's uniqueness and
  /// room (a runtime call) for every value of the document. The first room is the caller's
  /// (`JSONTape.make`, on its stack); past it the parser moves them to memory of its own
  /// (`grown`), which `deallocate()` frees.
  private var tokens: UnsafeMutablePointer<JSONTape.Token>
  private var capacity: Int
  private(set) var tokenCount = 0
  private var grown: UnsafeMutablePointer<JSONTape.Token>? = nil

  /// `room`: where the first `room.count` tokens go (it must have room for one at least).
  init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, room: UnsafeMutableBufferPointer<JSONTape.Token>) {
    self.bytes = bytes
    self.maxDepth = maxDepth
    if let base = room.baseAddress, room.count > 0 {
      tokens = base
      capacity = room.count
    } else {
      tokens = .allocate(capacity: 64)
      grown = tokens
      capacity = 64
    }
  }

  /// The tokens of the document parsed, valid until `deallocate()` (and while the caller's room is).
  var written: UnsafeBufferPointer<JSONTape.Token> { UnsafeBufferPointer(start: tokens, count: tokenCount) }

  /// Frees the memory the parser grew into, if any.
  mutating func deallocate() {
    grown?.deallocate()
    grown = nil
    capacity = 0
    tokenCount = 0
  }

  mutating func parseDocument() throws(JSONSyntaxError) {
    skipWhitespace()
    guard index < bytes.count else { throw fail("unexpected end of input") }
    try parseValue()
    skipWhitespace()
    guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
  }

  // MARK: - Helpers

  private func fail(_ message: String) -> JSONSyntaxError {
    JSONSyntaxError(message: message, offset: index)
  }

  private mutating func skipWhitespace() {
    while index < bytes.count {
      switch bytes[index] {
      case 0x20, 0x09, 0x0A, 0x0D: index += 1
      default: return
      }
    }
  }

  private func describeByte(_ byte: UInt8) -> String {
    if byte >= 0x21 && byte < 0x7F {
      return "unexpected character '\(Character(Unicode.Scalar(byte)))'"
    }
    return "unexpected byte 0x\(String(byte, radix: 16, uppercase: true))"
  }

  private mutating func append(_ kind: JSONTape.Kind, start: Int, end: Int, payload: Int64 = 0, escaped: Bool = false) {
    if tokenCount == capacity { grow() }
    (tokens + tokenCount).initialize(
      to: JSONTape.Token(kind: kind, escaped: escaped, start: start, end: end, after: tokenCount + 1, payload: payload))
    tokenCount += 1
  }

  /// Moves the tokens to twice the room (a token is plain data: moved by a copy of its bytes).
  private mutating func grow() {
    let larger = max(2 * capacity, 64)
    let room = UnsafeMutablePointer<JSONTape.Token>.allocate(capacity: larger)
    room.moveInitialize(from: tokens, count: tokenCount)
    grown?.deallocate()
    grown = room
    tokens = room
    capacity = larger
  }

  private mutating func parseValue() throws(JSONSyntaxError) {
    guard index < bytes.count else { throw fail("unexpected end of input") }
    let start = index
    switch bytes[index] {
    case UInt8(ascii: "{"): try parseObject()
    case UInt8(ascii: "["): try parseArray()
    case UInt8(ascii: "\""): try parseString()
    case UInt8(ascii: "t"):
      try expectLiteral("true")
      append(.bool, start: start, end: index, payload: 1)
    case UInt8(ascii: "f"):
      try expectLiteral("false")
      append(.bool, start: start, end: index, payload: 0)
    case UInt8(ascii: "n"):
      try expectLiteral("null")
      append(.null, start: start, end: index)
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
    default: throw fail(describeByte(bytes[index]))
    }
  }

  private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
    let count = literal.utf8CodeUnitCount
    guard bytes.count - index >= count else { throw fail("invalid literal") }
    let start = literal.utf8Start
    for offset in 0..<count where bytes[index + offset] != start[offset] {
      throw fail("invalid literal")
    }
    index += count
  }

  // MARK: - Containers

  private mutating func enter() throws(JSONSyntaxError) {
    depth += 1
    if depth > maxDepth { throw fail("JSON nested deeper than \(maxDepth) levels") }
  }

  /// Closes the container whose token is at `slot`: its subtree ends here.
  private mutating func close(_ slot: Int, count: Int) {
    tokens[slot].end = index
    tokens[slot].after = tokenCount
    tokens[slot].payload = Int64(count)
    depth -= 1
  }

  private mutating func parseObject() throws(JSONSyntaxError) {
    try enter()
    let slot = tokenCount
    append(.object, start: index, end: index)
    index += 1  // {
    skipWhitespace()
    if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
      index += 1
      close(slot, count: 0)
      return
    }
    var count = 0
    // Keys of a big object go into a set once a linear scan would cost more than hashing.
    var seenKeys: Set<String>? = nil
    // One bit a key of this object's first 16 (`keyBit`): a key whose bit is not yet set is no
    // duplicate, and is not compared with the earlier keys at all. A signaling frame's objects
    // have 2 to 6 keys of different lengths, so nearly every key is cleared by one test; a key
    // whose bit is set (a duplicate, or two keys sharing a bit) takes the full comparison, as
    // every key did. An escaped key is compared in full, and sets every bit: it may equal a
    // later key of another spelling, whose length and first byte its own do not tell.
    var keyBits: UInt64 = 0
    while true {
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in object") }
      guard bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key in object") }
      let keyOffset = index
      let keySlot = tokenCount
      try parseString()
      skipWhitespace()
      guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after object key") }
      index += 1
      skipWhitespace()
      try parseValue()
      var maybeSeen = true
      if count < 16 {
        let key = tokens[keySlot]
        // An unescaped key's first byte is in the input even when it is empty (its closing quote).
        let bit = key.escaped ? UInt64.max : Self.keyBit(count: key.end - key.start, first: bytes[key.start])
        maybeSeen = key.escaped || keyBits & bit != 0
        keyBits |= bit
      }
      if maybeSeen, isDuplicate(keySlot, in: slot, count: count, seen: &seenKeys) {
        let key = JSONTape.decodeString(tokens[keySlot], in: bytes)
        throw JSONSyntaxError(message: "duplicate key \"\(key)\"", offset: keyOffset)
      }
      count += 1
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in object") }
      switch bytes[index] {
      case UInt8(ascii: ","):
        index += 1
      case UInt8(ascii: "}"):
        index += 1
        close(slot, count: count)
        return
      default:
        throw fail("expected ',' or '}' in object")
      }
    }
  }

  /// An unescaped key's bit in its object's filter, by its length and first byte (the byte after
  /// its opening quote): equal keys get the same bit.
  @inline(__always)
  static func keyBit(count: Int, first: UInt8) -> UInt64 {
    1 << ((UInt64(truncatingIfNeeded: count) &* 7 &+ UInt64(first)) & 63)
  }

  /// Whether the key at `keySlot` repeats one of the `count` earlier keys of the object at `slot`.
  private func isDuplicate(_ keySlot: Int, in slot: Int, count: Int, seen: inout Set<String>?) -> Bool {
    let key = tokens[keySlot]
    if count >= 16 {
      if seen == nil {
        var keys = Set<String>(minimumCapacity: 32)
        var member = slot + 1
        for _ in 0..<count {
          keys.insert(JSONTape.decodeString(tokens[member], in: bytes))
          member = tokens[member + 1].after
        }
        seen = keys
      }
      return seen?.insert(JSONTape.decodeString(key, in: bytes)).inserted == false
    }
    var member = slot + 1
    for _ in 0..<count {
      if JSONTape.sameString(tokens[member], key, in: bytes) { return true }
      member = tokens[member + 1].after
    }
    return false
  }

  private mutating func parseArray() throws(JSONSyntaxError) {
    try enter()
    let slot = tokenCount
    append(.array, start: index, end: index)
    index += 1  // [
    skipWhitespace()
    if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
      index += 1
      close(slot, count: 0)
      return
    }
    var count = 0
    while true {
      skipWhitespace()
      try parseValue()
      count += 1
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in array") }
      switch bytes[index] {
      case UInt8(ascii: ","):
        index += 1
      case UInt8(ascii: "]"):
        index += 1
        close(slot, count: count)
        return
      default:
        throw fail("expected ',' or ']' in array")
      }
    }
  }

  // MARK: - Strings

  /// Validates a string in place and records its content's byte range (without the quotes).
  private mutating func parseString() throws(JSONSyntaxError) {
    index += 1  // opening quote
    let start = index
    var ascii = true
    var escaped = false
    var runStart = start  // where the current run of raw bytes (between escapes) starts
    while index < bytes.count {
      // Eight plain ASCII bytes at a time: most of an SDP is long runs without a quote, a
      // backslash, a control character or a non-ASCII byte.
      if ascii { skipPlainWords() }
      guard index < bytes.count else { break }
      let byte = bytes[index]
      if byte == UInt8(ascii: "\"") {
        if !ascii { try validateRun(runStart) }
        append(.string, start: start, end: index, escaped: escaped)
        index += 1
        return
      }
      if byte < 0x20 { throw fail("unescaped control character in string") }
      if byte >= 0x80 { ascii = false }
      if byte != UInt8(ascii: "\\") {
        index += 1
        continue
      }
      // An escape ends the current raw run: validate it (multi-byte sequences cannot span an escape).
      if !ascii { try validateRun(runStart) }
      ascii = true
      escaped = true
      index += 1
      guard index < bytes.count else { throw fail("unterminated escape sequence") }
      let escape = bytes[index]
      index += 1
      switch escape {
      case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
        break
      case UInt8(ascii: "u"):
        let escapeOffset = index - 2
        let scalar = try parseHex4()
        if scalar >= 0xD800 && scalar <= 0xDBFF {
          guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
          else {
            throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
          }
          index += 2
          let low = try parseHex4()
          guard low >= 0xDC00 && low <= 0xDFFF else {
            throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
          }
        } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
          throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
        }
      default:
        throw JSONSyntaxError(message: "invalid escape sequence", offset: index - 2)
      }
      runStart = index
    }
    throw JSONSyntaxError(message: "unterminated string", offset: start - 1)
  }

  /// Advances past bytes 0x20...0x7F other than `"` and `\\`, eight at a time (`PlainRunScan`).
  private mutating func skipPlainWords() {
    guard let base = bytes.baseAddress else { return }
    index = PlainRunScan.end(base, from: index, count: bytes.count, stoppingAtNonASCII: true)
  }

  private func validateRun(_ runStart: Int) throws(JSONSyntaxError) {
    if let bad = UTF8Validation.firstInvalidOffset(UnsafeBufferPointer(rebasing: bytes[runStart..<index])) {
      throw JSONSyntaxError(message: "invalid UTF-8 in string", offset: runStart + bad)
    }
  }

  private mutating func parseHex4() throws(JSONSyntaxError) -> UInt16 {
    guard bytes.count - index >= 4, let value = JSONTape.hex4(bytes, at: index) else {
      throw fail("invalid unicode escape")
    }
    index += 4
    return value
  }

  // MARK: - Numbers

  private mutating func parseNumber() throws(JSONSyntaxError) {
    let start = index
    var negative = false
    if bytes[index] == UInt8(ascii: "-") {
      negative = true
      index += 1
    }
    guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
    var integral = true
    var digits = 0
    var magnitude: UInt64 = 0
    var overflow = false
    if bytes[index] == UInt8(ascii: "0") {
      index += 1
      digits = 1
      if index < bytes.count, isDigit(bytes[index]) { throw fail("leading zeros are not allowed") }
    } else {
      while index < bytes.count, isDigit(bytes[index]) {
        let (times, o1) = magnitude.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
        if o1 || o2 { overflow = true }
        magnitude = sum
        digits += 1
        index += 1
      }
    }
    if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
      integral = false
      index += 1
      guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number: digit expected after '.'") }
      while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }
    if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
      integral = false
      index += 1
      if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
      guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number: digit expected in exponent") }
      while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }
    if integral && !overflow && digits > 0 {
      if negative {
        if magnitude <= UInt64(Int64.max) {
          append(.integer, start: start, end: index, payload: -Int64(magnitude))
          return
        }
        if magnitude == UInt64(Int64.max) + 1 {
          append(.integer, start: start, end: index, payload: Int64.min)
          return
        }
      } else if magnitude <= UInt64(Int64.max) {
        append(.integer, start: start, end: index, payload: Int64(magnitude))
        return
      }
    }
    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    guard let value = Double(text), value.isFinite else {
      throw JSONSyntaxError(message: "number out of range", offset: start)
    }
    append(.double, start: start, end: index, payload: Int64(bitPattern: value.bitPattern))
  }

  private func isDigit(_ byte: UInt8) -> Bool {
    byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
  }
}

enum UTF8Validation {
  /// Offset of the first byte of the first ill-formed sequence (Unicode Table 3-7), or nil.
  static func firstInvalidOffset(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
    var i = 0
    let n = bytes.count
    while i < n {
      let b0 = bytes[i]
      if b0 < 0x80 {
        i += 1
        continue
      }
      let length: Int
      var lower: UInt8 = 0x80
      var upper: UInt8 = 0xBF
      switch b0 {
      case 0xC2...0xDF: length = 2
      case 0xE0:
        length = 3
        lower = 0xA0
      case 0xE1...0xEC, 0xEE...0xEF: length = 3
      case 0xED:
        length = 3
        upper = 0x9F
      case 0xF0:
        length = 4
        lower = 0x90
      case 0xF1...0xF3: length = 4
      case 0xF4:
        length = 4
        upper = 0x8F
      default: return i
      }
      guard n - i >= length else { return i }
      let b1 = bytes[i + 1]
      guard b1 >= lower && b1 <= upper else { return i }
      if length > 2 {
        for k in 2..<length {
          let b = bytes[i + k]
          guard b >= 0x80 && b <= 0xBF else { return i }
        }
      }
      i += length
    }
    return nil
  }
}
