// memcmp: this module imports no Foundation, so it takes libc from the platform's module.
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A parsed JSON document as one flat array of tokens over the input bytes.
///
/// This is what typed decoders read instead of a `JSONValue` tree: parsing allocates one
/// array, no dictionary and no string; a string is made only when a reader asks for it, and
/// a key is compared in place. A container's token records where its subtree ends, so a
/// reader skips a value it does not want in one step.
///
/// A tape points into the bytes it was parsed from: it exists only inside the closure given
/// to `JSONTape.parse(_:maxDepth:syntaxError:_:)` and must not escape it.
public struct JSONTape {
  /// A value's position on the tape.
  public struct Index: Hashable, Sendable {
    let slot: Int
  }

  public enum Kind: UInt8, Sendable {
    case null, bool, integer, double, string, array, object
  }

  struct Token {
    var kind: Kind
    /// A string whose bytes hold escapes (it must be decoded, not copied).
    var escaped: Bool
    /// The value's bytes; for a string, its content without the quotes.
    var start: Int
    var end: Int
    /// The slot after this value's subtree.
    var after: Int
    /// bool: 0/1; integer: the value; double: its bit pattern; container: its element count.
    var payload: Int64
  }

  private let bytes: UnsafeBufferPointer<UInt8>
  private let tokens: [Token]

  private init(bytes: UnsafeBufferPointer<UInt8>, tokens: [Token]) {
    self.bytes = bytes
    self.tokens = tokens
  }

  /// Room for a tape's tokens, kept by one owner from one parse to the next (a value of one
  /// thread, not shared): parsing a document then allocates no tape once the room fits it.
  /// The room a document larger than `keptTokens` made is not kept.
  public struct Scratch {
    var tokens: [Token] = []
    static let keptTokens = 256

    public init() {}
  }

  /// Parses `bytes` strictly (see `JSONValue.parse`) and runs `body` on the tape. A syntax
  /// error is mapped through `syntaxError`, so that the caller's error type comes out.
  /// (Inlinable so that the caller's byte collection and result type are specialised: this
  /// runs once per signaling frame.)
  @inlinable
  public static func parse<Result, Failure: Error>(
    _ bytes: some Collection<UInt8>, maxDepth: Int, syntaxError: (JSONSyntaxError) -> Failure,
    _ body: (JSONTape) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    var scratch = Scratch()
    return try parse(bytes, maxDepth: maxDepth, scratch: &scratch, syntaxError: syntaxError, body)
  }

  /// `parse(_:maxDepth:syntaxError:_:)` with the tape's tokens in `scratch`'s room, which is
  /// kept for the next parse (one allocation fewer per document, for a caller that parses
  /// many: the server, a signaling frame after another on its network thread).
  @inlinable
  public static func parse<Result, Failure: Error>(
    _ bytes: some Collection<UInt8>, maxDepth: Int, scratch: inout Scratch,
    syntaxError: (JSONSyntaxError) -> Failure, _ body: (JSONTape) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    // The buffer closures cannot throw a typed error, so each returns its outcome as a value.
    func run(_ buffer: UnsafeBufferPointer<UInt8>) -> Swift.Result<Result, Failure> {
      switch make(buffer, maxDepth: maxDepth, scratch: &scratch) {
      case .success(let tape):
        do throws(Failure) { return .success(try body(tape)) } catch { return .failure(error) }
      case .failure(let error):
        return .failure(syntaxError(error))
      }
    }
    if let outcome = bytes.withContiguousStorageIfAvailable(run) { return try outcome.get() }
    return try Array(bytes).withUnsafeBufferPointer(run).get()
  }

  @usableFromInline
  static func make(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, scratch: inout Scratch)
    -> Swift.Result<JSONTape, JSONSyntaxError>
  {
    // The parser writes its tokens into room on the stack (or of its own, for a document of
    // more), and the tape's array is filled from them in one copy: the scratch's room, taken out
    // of it (moved, so that it is not shared and is emptied in place) and put back after (the tape
    // holds it too until it goes, before the next parse).
    withUnsafeTemporaryAllocation(of: Token.self, capacity: stackTokens) { room in
      var parser = JSONParser(buffer, maxDepth: maxDepth, room: room)
      defer { parser.deallocate() }
      do throws(JSONSyntaxError) {
        try parser.parseDocument()
      } catch {
        return .failure(error)
      }
      var tokens: [Token] = []
      swap(&tokens, &scratch.tokens)
      tokens.replaceSubrange(tokens.indices, with: parser.written)
      if tokens.capacity <= Scratch.keptTokens { scratch.tokens = tokens }
      return .success(JSONTape(bytes: buffer, tokens: tokens))
    }
  }

  /// Tokens the parser writes on the stack before it allocates: a relayed candidate has 15, an
  /// ack 5. (960 bytes: the standard library takes up to 1,024 from the stack, more from the heap.)
  static var stackTokens: Int { 24 }

  /// The document's top-level value.
  public var root: Index { Index(slot: 0) }

  public func kind(_ index: Index) -> Kind { tokens[index.slot].kind }

  public func isNull(_ index: Index) -> Bool { tokens[index.slot].kind == .null }

  public func bool(_ index: Index) -> Bool? {
    let token = tokens[index.slot]
    return token.kind == .bool ? token.payload != 0 : nil
  }

  /// The value as an exact integer: an integer, or a number with a fraction or exponent that
  /// is integral and in range (some encoders write `1.0`).
  public func integer(_ index: Index) -> Int64? {
    let token = tokens[index.slot]
    switch token.kind {
    case .integer: return token.payload
    case .double: return Int64(exactly: Double(bitPattern: UInt64(bitPattern: token.payload)))
    default: return nil
    }
  }

  /// Any number as a `Double` (integers beyond 2^53 are rounded).
  public func double(_ index: Index) -> Double? {
    let token = tokens[index.slot]
    switch token.kind {
    case .integer: return Double(token.payload)
    case .double: return Double(bitPattern: UInt64(bitPattern: token.payload))
    default: return nil
    }
  }

  public func string(_ index: Index) -> String? {
    let token = tokens[index.slot]
    guard token.kind == .string else { return nil }
    return Self.decodeString(token, in: bytes)
  }

  /// `body` run on a string value's UTF-8 bytes: in place when the string holds no escapes,
  /// else on its decoded text (as `string(_:)` gives it). Nil when the value is not a string.
  /// For a reader that only compares the bytes: no `String` is made for an unescaped one.
  public func withStringBytes<Result>(_ index: Index, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result? {
    let token = tokens[index.slot]
    guard token.kind == .string else { return nil }
    guard token.escaped else { return body(UnsafeBufferPointer(rebasing: bytes[token.start..<token.end])) }
    var text = Self.decodeString(token, in: bytes)
    return text.withUTF8(body)
  }

  /// `body` run on a string value's UTF-8 bytes in place when the string holds no escapes (its
  /// bytes are then its text, already validated as UTF-8 by the parse); nil when it holds an
  /// escape or the value is not a string (`string(_:)` decodes those). Such a string holds no
  /// NUL and no other byte below 0x20: the parser refuses them raw, so only an escape makes one.
  /// For a reader that checks a string before it makes one, or makes none.
  public func withUnescapedStringBytes<Result>(_ index: Index, _ body: (UnsafeBufferPointer<UInt8>) -> Result)
    -> Result?
  {
    let token = tokens[index.slot]
    guard token.kind == .string, !token.escaped else { return nil }
    return body(UnsafeBufferPointer(rebasing: bytes[token.start..<token.end]))
  }

  /// Whether a string value equals `text`, compared in place when it holds no escapes.
  public func string(_ index: Index, equals text: StaticString) -> Bool {
    let token = tokens[index.slot]
    guard token.kind == .string else { return false }
    return Self.matches(token, text, in: bytes)
  }

  /// Elements of an array or members of an object.
  public func count(_ index: Index) -> Int {
    let token = tokens[index.slot]
    switch token.kind {
    case .array, .object: return Int(token.payload)
    default: return 0
    }
  }

  /// The value of `key` in an object; nil when the key is absent or `object` is not an object.
  public func member(_ object: Index, _ key: StaticString) -> Index? {
    let token = tokens[object.slot]
    guard token.kind == .object, let base = bytes.baseAddress else { return nil }
    // A key given as a single Unicode scalar has no bytes to point at: compared as text.
    guard key.hasPointerRepresentation else { return member(object, named: key.description) }
    // The key's length and bytes are read once, not at every member; a member's key is compared
    // by its length, then its bytes, and an escaped one (rare) out of line: with the escaped
    // path's `String` compare inlined, every look-up paid for its registers.
    let keyCount = key.utf8CodeUnitCount
    let keyStart = key.utf8Start
    var slot = object.slot + 1
    for _ in 0..<token.payload {
      let name = tokens[slot]
      if name.escaped {
        if Self.matchesEscaped(name, key, in: bytes) { return Index(slot: slot + 1) }
      } else if name.end - name.start == keyCount, keyCount == 0 || memcmp(base + name.start, keyStart, keyCount) == 0 {
        return Index(slot: slot + 1)
      }
      slot = tokens[slot + 1].after
    }
    return nil
  }

  /// `member` by a key's text, each member's key decoded.
  private func member(_ object: Index, named key: String) -> Index? {
    let token = tokens[object.slot]
    var slot = object.slot + 1
    for _ in 0..<token.payload {
      if Self.decodeString(tokens[slot], in: bytes) == key { return Index(slot: slot + 1) }
      slot = tokens[slot + 1].after
    }
    return nil
  }

  /// `matches` for a key written with escapes, kept out of `member`'s loop.
  @inline(never)
  private static func matchesEscaped(_ token: Token, _ text: StaticString, in bytes: UnsafeBufferPointer<UInt8>)
    -> Bool
  {
    matches(token, text, in: bytes)
  }

  /// An object's members in document order.
  public func members(_ object: Index) -> [(key: String, value: Index)] {
    let token = tokens[object.slot]
    guard token.kind == .object else { return [] }
    var result: [(key: String, value: Index)] = []
    result.reserveCapacity(Int(token.payload))
    var slot = object.slot + 1
    for _ in 0..<token.payload {
      result.append((Self.decodeString(tokens[slot], in: bytes), Index(slot: slot + 1)))
      slot = tokens[slot + 1].after
    }
    return result
  }

  /// An array's elements in order.
  public func elements(_ array: Index) -> [Index] {
    let token = tokens[array.slot]
    guard token.kind == .array else { return [] }
    var result: [Index] = []
    result.reserveCapacity(Int(token.payload))
    var slot = array.slot + 1
    for _ in 0..<token.payload {
      result.append(Index(slot: slot))
      slot = tokens[slot].after
    }
    return result
  }

  /// The value's exact bytes in the input (for a string, with its quotes).
  public func rawBytes(_ index: Index) -> ArraySlice<UInt8> {
    let token = tokens[index.slot]
    if token.kind == .string { return ArraySlice(bytes[(token.start - 1)..<(token.end + 1)]) }
    return ArraySlice(bytes[token.start..<token.end])
  }

  /// The value as a `JSONValue` tree, for callers that want one.
  public func value(_ index: Index) -> JSONValue {
    let token = tokens[index.slot]
    switch token.kind {
    case .null: return .null
    case .bool: return .bool(token.payload != 0)
    case .integer: return .int(token.payload)
    case .double: return .double(Double(bitPattern: UInt64(bitPattern: token.payload)))
    case .string: return .string(Self.decodeString(token, in: bytes))
    case .array: return .array(elements(index).map { value($0) })
    case .object:
      var object = [String: JSONValue](minimumCapacity: max(Int(token.payload), 1))
      for member in members(index) { object[member.key] = value(member.value) }
      return .object(object)
    }
  }

  // MARK: - Strings in place

  static func matches(_ token: Token, _ text: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    if token.escaped { return decodeString(token, in: bytes) == text.description }
    let count = token.end - token.start
    guard count == text.utf8CodeUnitCount else { return false }
    guard count > 0, let base = bytes.baseAddress else { return true }
    return memcmp(base + token.start, text.utf8Start, count) == 0
  }

  static func sameString(_ a: Token, _ b: Token, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    if a.escaped || b.escaped { return decodeString(a, in: bytes) == decodeString(b, in: bytes) }
    let count = a.end - a.start
    guard count == b.end - b.start else { return false }
    guard count > 0, let base = bytes.baseAddress else { return true }
    return memcmp(base + a.start, base + b.start, count) == 0
  }

  /// The string a (validated) string token holds.
  static func decodeString(_ token: Token, in bytes: UnsafeBufferPointer<UInt8>) -> String {
    let raw = UnsafeBufferPointer(rebasing: bytes[token.start..<token.end])
    guard token.escaped else { return String(decoding: raw, as: UTF8.self) }
    var buffer: [UInt8] = []
    buffer.reserveCapacity(raw.count)
    var index = 0
    while index < raw.count {
      // Copy the run up to the next escape at once (an SDP is long runs between escaped newlines).
      var runEnd = index
      while runEnd < raw.count, raw[runEnd] != UInt8(ascii: "\\") { runEnd += 1 }
      if runEnd > index { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: raw[index..<runEnd])) }
      index = runEnd
      guard index + 1 < raw.count else {
        if index < raw.count { buffer.append(raw[index]) }
        break
      }
      let escape = raw[index + 1]
      index += 2
      switch escape {
      case UInt8(ascii: "b"): buffer.append(0x08)
      case UInt8(ascii: "f"): buffer.append(0x0C)
      case UInt8(ascii: "n"): buffer.append(0x0A)
      case UInt8(ascii: "r"): buffer.append(0x0D)
      case UInt8(ascii: "t"): buffer.append(0x09)
      case UInt8(ascii: "u"):
        guard raw.count - index >= 4, let high = hex4(raw, at: index) else {
          return String(decoding: buffer, as: UTF8.self)
        }
        index += 4
        var scalar = UInt32(high)
        if high >= 0xD800 && high <= 0xDBFF, raw.count - index >= 6, let low = hex4(raw, at: index + 2) {
          scalar = 0x10000 + ((scalar - 0xD800) << 10) + (UInt32(low) - 0xDC00)
          index += 6
        }
        appendUTF8(Unicode.Scalar(scalar) ?? "\u{FFFD}", to: &buffer)
      default: buffer.append(escape)  // " \ /
      }
    }
    return String(decoding: buffer, as: UTF8.self)
  }

  static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int) -> UInt16? {
    var value: UInt16 = 0
    for byte in bytes[start..<(start + 4)] {
      let digit: UInt8
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
      default: return nil
      }
      value = value << 4 | UInt16(digit)
    }
    return value
  }

  private static func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
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
}
