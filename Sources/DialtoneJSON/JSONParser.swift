/// A strict RFC 8259 parser over a byte buffer.
///
/// Strict means: no trailing commas, no comments, no leading zeros, no NaN/Infinity, no raw
/// control characters inside strings, well-formed UTF-8 only, no lone surrogate escapes,
/// no duplicate object keys, no numbers beyond the finite `Double` range, at most `maxDepth`
/// levels of nesting (deeply nested input must not be able to exhaust the stack), and nothing
/// but whitespace after the value.
///
/// It works in place on the input buffer: strings without escapes are validated and decoded
/// straight from it, and integers are accumulated without going through `String`.
struct JSONParser {
  private let bytes: UnsafeBufferPointer<UInt8>
  private let maxDepth: Int
  private var index = 0
  private var depth = 0

  init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
    self.bytes = bytes
    self.maxDepth = maxDepth
  }

  mutating func parseDocument() throws(JSONSyntaxError) -> JSONValue {
    skipWhitespace()
    guard index < bytes.count else { throw fail("unexpected end of input") }
    let value = try parseValue()
    skipWhitespace()
    guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
    return value
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

  private mutating func parseValue() throws(JSONSyntaxError) -> JSONValue {
    guard index < bytes.count else { throw fail("unexpected end of input") }
    switch bytes[index] {
    case UInt8(ascii: "{"): return try parseObject()
    case UInt8(ascii: "["): return try parseArray()
    case UInt8(ascii: "\""): return .string(try parseString())
    case UInt8(ascii: "t"):
      try expectLiteral("true")
      return .bool(true)
    case UInt8(ascii: "f"):
      try expectLiteral("false")
      return .bool(false)
    case UInt8(ascii: "n"):
      try expectLiteral("null")
      return .null
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
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

  private mutating func parseObject() throws(JSONSyntaxError) -> JSONValue {
    try enter()
    index += 1  // {
    skipWhitespace()
    if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
      index += 1
      depth -= 1
      return .object([:])
    }
    // Sized for a typical protocol object up front: growing 1→2→4→8 rehashes every key three times.
    var object = [String: JSONValue](minimumCapacity: 8)
    while true {
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in object") }
      guard bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key in object") }
      let keyOffset = index
      let key = try parseString()
      skipWhitespace()
      guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after object key") }
      index += 1
      skipWhitespace()
      let value = try parseValue()
      if object.updateValue(value, forKey: key) != nil {
        throw JSONSyntaxError(message: "duplicate key \"\(key)\"", offset: keyOffset)
      }
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in object") }
      switch bytes[index] {
      case UInt8(ascii: ","):
        index += 1
      case UInt8(ascii: "}"):
        index += 1
        depth -= 1
        return .object(object)
      default:
        throw fail("expected ',' or '}' in object")
      }
    }
  }

  private mutating func parseArray() throws(JSONSyntaxError) -> JSONValue {
    try enter()
    index += 1  // [
    var array: [JSONValue] = []
    skipWhitespace()
    if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
      index += 1
      depth -= 1
      return .array(array)
    }
    while true {
      skipWhitespace()
      array.append(try parseValue())
      skipWhitespace()
      guard index < bytes.count else { throw fail("unexpected end of input in array") }
      switch bytes[index] {
      case UInt8(ascii: ","):
        index += 1
      case UInt8(ascii: "]"):
        index += 1
        depth -= 1
        return .array(array)
      default:
        throw fail("expected ',' or ']' in array")
      }
    }
  }

  // MARK: - Strings

  private mutating func parseString() throws(JSONSyntaxError) -> String {
    index += 1  // opening quote
    let start = index
    var ascii = true
    // Fast path: no escapes.
    while index < bytes.count {
      let byte = bytes[index]
      if byte == UInt8(ascii: "\"") {
        let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if !ascii, let bad = UTF8Validation.firstInvalidOffset(slice) {
          throw JSONSyntaxError(message: "invalid UTF-8 in string", offset: start + bad)
        }
        index += 1
        return String(decoding: slice, as: UTF8.self)
      }
      if byte == UInt8(ascii: "\\") { break }
      if byte < 0x20 { throw fail("unescaped control character in string") }
      if byte >= 0x80 { ascii = false }
      index += 1
    }
    guard index < bytes.count else { throw JSONSyntaxError(message: "unterminated string", offset: start - 1) }
    // Slow path: copy what we have, then decode escapes.
    var buffer: [UInt8] = Array(bytes[start..<index])
    var validatedUpTo = 0  // bytes of `buffer` already known to be valid UTF-8 (escape output)
    var rawStart = start  // offset in input where the current raw run starts
    func validateRun(_ buffer: [UInt8], from: Int, inputOffset: Int) throws(JSONSyntaxError) {
      let bad: Int? = buffer.withUnsafeBufferPointer { all in
        UTF8Validation.firstInvalidOffset(UnsafeBufferPointer(rebasing: all[from...]))
      }
      if let bad { throw JSONSyntaxError(message: "invalid UTF-8 in string", offset: inputOffset + bad) }
    }
    while index < bytes.count {
      let byte = bytes[index]
      if byte == UInt8(ascii: "\"") {
        try validateRun(buffer, from: validatedUpTo, inputOffset: rawStart)
        index += 1
        return String(decoding: buffer, as: UTF8.self)
      }
      if byte < 0x20 { throw fail("unescaped control character in string") }
      if byte != UInt8(ascii: "\\") {
        // Copy the whole run up to the next quote, backslash or control byte at once.
        let runStart = index
        index += 1
        while index < bytes.count {
          let next = bytes[index]
          if next == UInt8(ascii: "\"") || next == UInt8(ascii: "\\") || next < 0x20 { break }
          index += 1
        }
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
        continue
      }
      // An escape ends the current raw run: validate it (multi-byte sequences cannot span an escape).
      try validateRun(buffer, from: validatedUpTo, inputOffset: rawStart)
      index += 1
      guard index < bytes.count else { throw fail("unterminated escape sequence") }
      let escape = bytes[index]
      index += 1
      switch escape {
      case UInt8(ascii: "\""): buffer.append(0x22)
      case UInt8(ascii: "\\"): buffer.append(0x5C)
      case UInt8(ascii: "/"): buffer.append(0x2F)
      case UInt8(ascii: "b"): buffer.append(0x08)
      case UInt8(ascii: "f"): buffer.append(0x0C)
      case UInt8(ascii: "n"): buffer.append(0x0A)
      case UInt8(ascii: "r"): buffer.append(0x0D)
      case UInt8(ascii: "t"): buffer.append(0x09)
      case UInt8(ascii: "u"):
        let escapeOffset = index - 2
        var scalar = UInt32(try parseHex4())
        if scalar >= 0xD800 && scalar <= 0xDBFF {
          guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
          else {
            throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
          }
          index += 2
          let low = UInt32(try parseHex4())
          guard low >= 0xDC00 && low <= 0xDFFF else {
            throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
          }
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
          throw JSONSyntaxError(message: "unpaired surrogate escape", offset: escapeOffset)
        }
        guard let unicodeScalar = Unicode.Scalar(scalar) else {
          throw JSONSyntaxError(message: "invalid unicode escape", offset: escapeOffset)
        }
        appendUTF8(unicodeScalar, to: &buffer)
      default:
        throw JSONSyntaxError(message: "invalid escape sequence", offset: index - 2)
      }
      validatedUpTo = buffer.count
      rawStart = index
    }
    throw JSONSyntaxError(message: "unterminated string", offset: start - 1)
  }

  private func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
    let v = scalar.value
    switch v {
    case 0..<0x80:
      buffer.append(UInt8(v))
    case 0x80..<0x800:
      buffer.append(UInt8(0xC0 | (v >> 6)))
      buffer.append(UInt8(0x80 | (v & 0x3F)))
    case 0x800..<0x10000:
      buffer.append(UInt8(0xE0 | (v >> 12)))
      buffer.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
      buffer.append(UInt8(0x80 | (v & 0x3F)))
    default:
      buffer.append(UInt8(0xF0 | (v >> 18)))
      buffer.append(UInt8(0x80 | ((v >> 12) & 0x3F)))
      buffer.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
      buffer.append(UInt8(0x80 | (v & 0x3F)))
    }
  }

  private mutating func parseHex4() throws(JSONSyntaxError) -> UInt16 {
    guard bytes.count - index >= 4 else { throw fail("invalid unicode escape") }
    var value: UInt16 = 0
    for _ in 0..<4 {
      let byte = bytes[index]
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: throw fail("invalid unicode escape")
      }
      value = value << 4 | UInt16(digit)
      index += 1
    }
    return value
  }

  // MARK: - Numbers

  private mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
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
        if magnitude <= UInt64(Int64.max) { return .int(-Int64(magnitude)) }
        if magnitude == UInt64(Int64.max) + 1 { return .int(Int64.min) }
      } else if magnitude <= UInt64(Int64.max) {
        return .int(Int64(magnitude))
      }
    }
    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    guard let value = Double(text), value.isFinite else {
      throw JSONSyntaxError(message: "number out of range", offset: start)
    }
    return .double(value)
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
