import DialtoneJSON

// memchr, from the platform's C library (this file needs nothing else of Foundation).
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Fills a `WireCodable` from one object of a `JSONTape`: no tree, a string made only for a
/// field that is read. Errors name the field by its dotted path (`"candidate.candidate"`).
public struct WireDecoder: WireCoder {
  public typealias Failure = ProtocolError

  let tape: JSONTape
  let object: JSONTape.Index
  /// Where `object` is in the message: at `outerPath` ("" for the top level), or when `field`
  /// is set, the member `field` of the object there. Its text (`path`) is made only for an
  /// error: most nested objects decode without one, and every relayed candidate has one.
  private let outerPath: String
  private let field: StaticString?
  let options: WireDecodingOptions
  init(tape: JSONTape, object: JSONTape.Index, path: String, options: WireDecodingOptions) {
    self.init(tape: tape, object: object, outerPath: path, field: nil, options: options)
  }

  private init(
    tape: JSONTape, object: JSONTape.Index, outerPath: String, field: StaticString?, options: WireDecodingOptions
  ) {
    self.tape = tape
    self.object = object
    self.outerPath = outerPath
    self.field = field
    self.options = options
  }

  /// The dotted location of `object` in the message ("" for the top level).
  var path: String {
    guard let field else { return outerPath }
    return Self.name(field, in: outerPath)
  }

  /// Decodes a whole document holding one `T`.
  public static func decode<T: WireCodable>(
    _ type: T.Type, from bytes: some Collection<UInt8>, options: WireDecodingOptions
  ) throws(ProtocolError) -> T {
    if bytes.isEmpty { throw ProtocolError(.badRequest, "empty body") }
    return try JSONTape.parse(bytes, maxDepth: Limits.maxJSONDepth, syntaxError: Self.malformed) {
      (tape: JSONTape) throws(ProtocolError) -> T in
      try decode(T.self, at: tape.root, in: tape, path: "", options: options)
    }
  }

  static func malformed(_ error: JSONSyntaxError) -> ProtocolError {
    ProtocolError(.badRequest, "malformed JSON: \(error)")
  }

  static func decode<T: WireCodable>(
    _ type: T.Type, at index: JSONTape.Index, in tape: JSONTape, path: String, options: WireDecodingOptions
  ) throws(ProtocolError) -> T {
    guard tape.kind(index) == .object else {
      if path.isEmpty { throw ProtocolError(.badRequest, "expected a JSON object") }
      throw ProtocolError(.badRequest, "\"\(path)\" must be an object")
    }
    var decoder = WireDecoder(tape: tape, object: index, path: path, options: options)
    return try decoder.body()
  }

  // MARK: Fields

  /// The member's value; nil when absent or `null`.
  func value(_ key: StaticString) -> JSONTape.Index? {
    guard let index = tape.member(object, key), !tape.isNull(index) else { return nil }
    return index
  }

  func name(_ key: StaticString) -> String {
    Self.name(key, in: path)
  }

  private static func name(_ key: StaticString, in path: String) -> String {
    path.isEmpty ? key.description : path + "." + key.description
  }

  func missing(_ key: StaticString) -> ProtocolError {
    ProtocolError(.badRequest, "\"\(name(key))\" is required")
  }

  func wrongType(_ key: StaticString, _ expected: String) -> ProtocolError {
    ProtocolError(.badRequest, "\"\(name(key))\" must be \(expected)")
  }

  private func text(_ key: StaticString, at index: JSONTape.Index, _ rule: WireText) throws(ProtocolError) -> String {
    // A string without escapes is checked in its bytes on the tape and made once: no NUL scan
    // (such a string cannot hold one) and no second pass over a `String` for the rules.
    let unescaped = tape.withUnescapedStringBytes(index) { (bytes) -> Result<String, ProtocolError> in
      if let problem = problem(key, bytes, rule, mayHoldNUL: false) { return .failure(problem) }
      return .success(String(decoding: bytes, as: UTF8.self))
    }
    if let unescaped { return try unescaped.get() }
    guard var text = tape.string(index) else { throw wrongType(key, "a string") }
    if let problem = text.withUTF8({ problem(key, $0, rule, mayHoldNUL: true) }) { throw problem }
    return text
  }

  /// What is wrong with a string of `key` whose UTF-8 bytes are `bytes`, by `rule` (and the
  /// protocol's limits when they are enforced), or nil.
  private func problem(_ key: StaticString, _ bytes: UnsafeBufferPointer<UInt8>, _ rule: WireText, mayHoldNUL: Bool)
    -> ProtocolError?
  {
    let count = bytes.count
    if count < rule.minBytes {
      return ProtocolError(.badRequest, "\"\(name(key))\" must not be empty")
    }
    guard options.enforceLimits else { return nil }
    if let maxBytes = rule.maxBytes, count > maxBytes {
      if rule.tooLarge { return ProtocolError(.tooLarge, "\"\(name(key))\" exceeds \(maxBytes) bytes") }
      return ProtocolError(.badRequest, "\"\(name(key))\" must be at most \(maxBytes) bytes")
    }
    // PostgreSQL's text cannot hold NUL, and no field of the protocol has a use for one. One
    // `memchr`: an SDP runs to kilobytes.
    if mayHoldNUL, let start = bytes.baseAddress, memchr(start, 0, count) != nil {
      return ProtocolError(.badRequest, "\"\(name(key))\" must not contain NUL")
    }
    if rule.isCallID, let problem = CallIDRules.problem(withUTF8: bytes) {
      return ProtocolError(.badRequest, "\"\(name(key))\" \(problem)")
    }
    return nil
  }

  private func number(_ key: StaticString, at index: JSONTape.Index, _ range: ClosedRange<Int64>) throws(ProtocolError)
    -> Int64
  {
    guard let number = tape.integer(index) else { throw wrongType(key, "an integer") }
    guard range.contains(number) else {
      if range.upperBound == Int64.max { throw wrongType(key, "an integer >= \(range.lowerBound)") }
      throw wrongType(key, "an integer from \(range.lowerBound) to \(range.upperBound)")
    }
    return number
  }

  private func member<E: WireEnum>(_ key: StaticString, at index: JSONTape.Index) throws(ProtocolError) -> E {
    let raw = try text(key, at: index, .nonEmpty)
    if let known = E(rawValue: raw) { return known }
    if !options.enforceLimits, let fallback = E.lenientFallback { return fallback }
    throw ProtocolError(.badRequest, "\"\(name(key))\" \(E.unknownValueProblem)")
  }

  private func nested<T: WireCodable>(_ key: StaticString, at index: JSONTape.Index) throws(ProtocolError) -> T {
    guard tape.kind(index) == .object else { throw wrongType(key, "an object") }
    var decoder = WireDecoder(tape: tape, object: index, outerPath: path, field: key, options: options)
    return try decoder.body()
  }

  // MARK: WireCoder

  public mutating func string(_ key: StaticString, _ value: inout String, _ rule: WireText) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    value = try text(key, at: index, rule)
  }

  public mutating func string(_ key: StaticString, _ value: inout String?, _ rule: WireText) throws(ProtocolError) {
    value = try self.value(key).map { (index) throws(ProtocolError) in try text(key, at: index, rule) }
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    guard let flag = tape.bool(index) else { throw wrongType(key, "a boolean") }
    value = flag
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool?) throws(ProtocolError) {
    guard let index = self.value(key) else {
      value = nil
      return
    }
    guard let flag = tape.bool(index) else { throw wrongType(key, "a boolean") }
    value = flag
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool, absent: Bool) throws(ProtocolError) {
    var read: Bool?
    try bool(key, &read)
    value = read ?? absent
  }

  public mutating func flag(_ key: StaticString, _ value: inout Bool) throws(ProtocolError) {
    try bool(key, &value, absent: false)
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int, _ range: ClosedRange<Int64>)
    throws(ProtocolError)
  {
    guard let index = self.value(key) else { throw missing(key) }
    value = Int(try number(key, at: index, range))
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int?, _ range: ClosedRange<Int64>)
    throws(ProtocolError)
  {
    value = try self.value(key).map { (index) throws(ProtocolError) in Int(try number(key, at: index, range)) }
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int64, _ range: ClosedRange<Int64>)
    throws(ProtocolError)
  {
    guard let index = self.value(key) else { throw missing(key) }
    value = try number(key, at: index, range)
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int64?, _ range: ClosedRange<Int64>)
    throws(ProtocolError)
  {
    value = try self.value(key).map { (index) throws(ProtocolError) in try number(key, at: index, range) }
  }

  public mutating func decimal(_ key: StaticString, _ value: inout Double?, _ range: ClosedRange<Double>)
    throws(ProtocolError)
  {
    guard let index = self.value(key) else {
      value = nil
      return
    }
    guard let number = tape.double(index), number.isFinite else { throw wrongType(key, "a number") }
    if options.enforceLimits, !range.contains(number) {
      throw wrongType(key, "a number from \(Self.plain(range.lowerBound)) to \(Self.plain(range.upperBound))")
    }
    value = number
  }

  private static func plain(_ number: Double) -> String {
    number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
  }

  public mutating func seq(_ key: StaticString, _ value: inout UInt64) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    value = UInt64(try number(key, at: index, 0...Int64(Limits.maxSeq)))
  }

  public mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    value = try member(key, at: index)
  }

  public mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E?) throws(ProtocolError) {
    value = try self.value(key).map { (index) throws(ProtocolError) -> E in try member(key, at: index) }
  }

  public mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    value = try nested(key, at: index)
  }

  public mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T?) throws(ProtocolError) {
    value = try self.value(key).map { (index) throws(ProtocolError) -> T in try nested(key, at: index) }
  }

  public mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]?) throws(ProtocolError) {
    guard self.value(key) != nil else {
      value = nil
      return
    }
    var present: [T] = []
    try objects(key, &present)
    value = present
  }

  public mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    guard tape.kind(index) == .array else { throw wrongType(key, "an array") }
    var result: [T] = []
    result.reserveCapacity(tape.count(index))
    for (offset, element) in tape.elements(index).enumerated() {
      let elementPath = "\(name(key))[\(offset)]"
      guard tape.kind(element) == .object else {
        throw ProtocolError(.badRequest, "\"\(elementPath)\" must be an object")
      }
      result.append(try Self.decode(T.self, at: element, in: tape, path: elementPath, options: options))
    }
    value = result
  }

  public mutating func integers(_ key: StaticString, _ value: inout [Int64], _ range: ClosedRange<Int64>)
    throws(ProtocolError)
  {
    guard let index = self.value(key) else {
      value = []
      return
    }
    guard tape.kind(index) == .array else { throw wrongType(key, "an array of integers") }
    var collected: [Int64] = []
    collected.reserveCapacity(tape.count(index))
    for (offset, element) in tape.elements(index).enumerated() {
      guard let number = tape.integer(element), range.contains(number) else {
        throw ProtocolError(
          .badRequest, "\"\(name(key))[\(offset)]\" must be an integer from \(range.lowerBound) to \(range.upperBound)")
      }
      collected.append(number)
    }
    value = collected
  }

  public mutating func strings(_ key: StaticString, _ value: inout [String], acceptSingle: Bool, nonEmpty: Bool)
    throws(ProtocolError)
  {
    guard let index = self.value(key) else { throw missing(key) }
    switch tape.kind(index) {
    case .string where acceptSingle:
      value = [tape.string(index) ?? ""]
    case .array:
      var collected: [String] = []
      for (offset, element) in tape.elements(index).enumerated() {
        guard let text = tape.string(element) else {
          throw ProtocolError(.badRequest, "\"\(name(key))[\(offset)]\" must be a string")
        }
        collected.append(text)
      }
      value = collected
    default:
      throw wrongType(key, acceptSingle ? "an array of strings or a string" : "an array of strings")
    }
    if nonEmpty && value.isEmpty {
      throw ProtocolError(.badRequest, "\"\(name(key))\" must not be empty")
    }
  }

  public mutating func names(_ key: StaticString, _ value: inout [String], _ rule: WireText) throws(ProtocolError) {
    guard let index = self.value(key) else {
      value = []
      return
    }
    guard tape.kind(index) == .array else { throw wrongType(key, "an array of strings") }
    let elements = tape.elements(index)
    if options.enforceLimits, elements.count > Limits.maxFeatures {
      throw ProtocolError(.badRequest, "\"\(name(key))\" must have at most \(Limits.maxFeatures) entries")
    }
    var collected: [String] = []
    for element in elements { collected.append(try text(key, at: element, rule)) }
    value = collected
  }

  public mutating func pushBool(_ key: StaticString, _ value: inout Bool) throws(ProtocolError) {
    guard let index = self.value(key) else {
      value = false
      return
    }
    if let flag = tape.bool(index) {
      value = flag
    } else if tape.string(index, equals: "true") || tape.string(index, equals: "1") {
      value = true
    } else if tape.string(index, equals: "false") || tape.string(index, equals: "0") {
      value = false
    } else {
      throw wrongType(key, "a boolean")
    }
  }

  public mutating func pushInteger(_ key: StaticString, _ value: inout Int64) throws(ProtocolError) {
    guard let index = self.value(key) else { throw missing(key) }
    if let text = tape.string(index) {
      guard let number = Int64(text), number >= 0 else { throw wrongType(key, "an integer") }
      value = number
    } else {
      value = try number(key, at: index, 0...Int64.max)
    }
  }

  public mutating func pushInteger(_ key: StaticString, _ value: inout Int64?) throws(ProtocolError) {
    guard self.value(key) != nil else {
      value = nil
      return
    }
    var read: Int64 = 0
    try pushInteger(key, &read)
    value = read
  }

  public mutating func constant(_ key: StaticString, _ value: StaticString) throws(ProtocolError) {
    var read = ""
    try string(key, &read, .nonEmpty)
    guard read == value.description else {
      throw ProtocolError(.badRequest, "\"\(name(key))\" must be \"\(value)\"")
    }
  }

  public mutating func marker(_ key: StaticString, _ value: Int, missing problem: String) throws(ProtocolError) {
    guard self.value(key) != nil else { throw ProtocolError(.badRequest, problem) }
  }

  public mutating func precheck(_ key: StaticString, equals value: StaticString?, missing problem: String?)
    throws(ProtocolError)
  {
    if let problem, self.value(key) == nil { throw ProtocolError(.badRequest, problem) }
    if let value { try constant(key, value) }
  }

  public mutating func derived(_ key: StaticString, _ value: @autoclosure () -> JSONValue) {}
}
