import DialtoneJSON

/// Writes a `WireCodable` straight into compact JSON bytes, keys in byte-wise order.
///
/// A message's envelope members (`type`, `id`, `seq`) are not fields of its payload: they are
/// merged in among the payload's fields at their key's place. A `seq` can be left as a slot, so
/// that a fan-out message is encoded once and each device's copy only splices its seq in.
public struct WireEncoder: WireCoder {
  public typealias Failure = Never

  /// An envelope member of the top-level object.
  enum EnvelopeMember {
    case text(StaticString, String)
    case number(StaticString, UInt64)
    /// Where `"seq":N` goes; filled per recipient by `ServerFrame.bytes(seq:)`.
    case seqSlot

    var key: StaticString {
      switch self {
      case .text(let key, _), .number(let key, _): return key
      case .seqSlot: return "seq"
      }
    }
  }

  // Most frames fit (a relayed candidate is ~250 bytes); an SDP grows it once or twice.
  private var out = JSONWriter(capacity: 512)
  private var needsComma = false
  private var depth = 0
  private var lastKey: StaticString?
  /// At most two members (`type` and one of `id`/`seq`), sorted, flushed as fields pass them.
  private var envelope: (EnvelopeMember?, EnvelopeMember?)
  private(set) var seqSlot: (offset: Int, leadingComma: Bool)?

  private init(envelope: (EnvelopeMember?, EnvelopeMember?)) {
    self.envelope = envelope
  }

  /// The JSON object of `value`.
  public static func encode<T: WireCodable>(_ value: T) -> [UInt8] {
    var encoder = WireEncoder(envelope: (nil, nil))
    encoder.writeObject(value)
    return encoder.out.bytes
  }

  /// The JSON object of `value` with envelope members, given in key order.
  static func encode<T: WireCodable>(_ value: T, envelope first: EnvelopeMember, _ second: EnvelopeMember? = nil)
    -> (bytes: [UInt8], seqSlot: (offset: Int, leadingComma: Bool)?)
  {
    var encoder = WireEncoder(envelope: (first, second))
    encoder.writeObject(value)
    return (encoder.out.bytes, encoder.seqSlot)
  }

  // MARK: Structure

  private mutating func writeObject<T: WireCodable>(_ value: T) {
    let outerComma = needsComma
    let outerKey = lastKey
    out.append(UInt8(ascii: "{"))
    needsComma = false
    lastKey = nil
    depth += 1
    var copy = value
    copy.wire(&self)
    if depth == 1 { flushEnvelope(before: nil) }
    depth -= 1
    out.append(UInt8(ascii: "}"))
    needsComma = outerComma
    lastKey = outerKey
  }

  /// Writes `"key":`, after the envelope members that sort before it.
  private mutating func key(_ key: StaticString) {
    if depth == 1 { flushEnvelope(before: key) }
    writeKey(key)
  }

  private mutating func writeKey(_ key: StaticString) {
    assert(lastKey.map { Self.precedes($0, key) } ?? true, "wire fields must be described in key order: \(key)")
    lastKey = key
    if needsComma { out.append(UInt8(ascii: ",")) }
    needsComma = true
    out.append(UInt8(ascii: "\""))
    out.append(key)
    out.append(UInt8(ascii: "\""))
    out.append(UInt8(ascii: ":"))
  }

  private mutating func flushEnvelope(before limit: StaticString?) {
    while let member = envelope.0, limit.map({ Self.precedes(member.key, $0) }) ?? true {
      envelope = (envelope.1, nil)
      switch member {
      case .text(let name, let text):
        writeKey(name)
        out.writeString(text)
      case .number(let name, let number):
        writeKey(name)
        out.writeInteger(Int64(clamping: number))
      case .seqSlot:
        seqSlot = (out.bytes.count, needsComma)
      }
    }
  }

  static func precedes(_ a: StaticString, _ b: StaticString) -> Bool {
    let x = UnsafeBufferPointer(start: a.utf8Start, count: a.utf8CodeUnitCount)
    let y = UnsafeBufferPointer(start: b.utf8Start, count: b.utf8CodeUnitCount)
    return x.lexicographicallyPrecedes(y)
  }

  // MARK: WireCoder

  public mutating func string(_ key: StaticString, _ value: inout String, _ rule: WireText) {
    self.key(key)
    out.writeString(value)
  }

  public mutating func string(_ key: StaticString, _ value: inout String?, _ rule: WireText) {
    guard let text = value else { return }
    self.key(key)
    out.writeString(text)
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool) {
    self.key(key)
    out.append(value ? "true" : "false")
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool?) {
    guard var flag = value else { return }
    bool(key, &flag)
  }

  public mutating func bool(_ key: StaticString, _ value: inout Bool, absent: Bool) {
    bool(key, &value)
  }

  public mutating func flag(_ key: StaticString, _ value: inout Bool) {
    if value { bool(key, &value) }
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int, _ range: ClosedRange<Int64>) {
    self.key(key)
    out.writeInteger(Int64(value))
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int?, _ range: ClosedRange<Int64>) {
    guard let number = value else { return }
    self.key(key)
    out.writeInteger(Int64(number))
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int64, _ range: ClosedRange<Int64>) {
    self.key(key)
    out.writeInteger(value)
  }

  public mutating func integer(_ key: StaticString, _ value: inout Int64?, _ range: ClosedRange<Int64>) {
    guard let number = value else { return }
    self.key(key)
    out.writeInteger(number)
  }

  public mutating func decimal(_ key: StaticString, _ value: inout Double?, _ range: ClosedRange<Double>) {
    guard let number = value, number.isFinite else { return }
    self.key(key)
    out.write(.double(number))
  }

  public mutating func seq(_ key: StaticString, _ value: inout UInt64) {
    self.key(key)
    out.writeInteger(Int64(clamping: value))
  }

  public mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E) {
    self.key(key)
    out.writeString(value.rawValue)
  }

  public mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E?) {
    guard var member = value else { return }
    enumeration(key, &member)
  }

  public mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T) {
    self.key(key)
    writeObject(value)
  }

  public mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T?) {
    guard var nested = value else { return }
    object(key, &nested)
  }

  public mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]?) {
    guard var present = value else { return }
    objects(key, &present)
  }

  public mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]) {
    self.key(key)
    out.append(UInt8(ascii: "["))
    for (offset, element) in value.enumerated() {
      if offset > 0 { out.append(UInt8(ascii: ",")) }
      writeObject(element)
    }
    out.append(UInt8(ascii: "]"))
  }

  public mutating func integers(_ key: StaticString, _ value: inout [Int64], _ range: ClosedRange<Int64>) {
    self.key(key)
    out.append(UInt8(ascii: "["))
    for (offset, number) in value.enumerated() {
      if offset > 0 { out.append(UInt8(ascii: ",")) }
      out.writeInteger(number)
    }
    out.append(UInt8(ascii: "]"))
  }

  public mutating func strings(_ key: StaticString, _ value: inout [String], acceptSingle: Bool, nonEmpty: Bool) {
    self.key(key)
    out.append(UInt8(ascii: "["))
    for (offset, text) in value.enumerated() {
      if offset > 0 { out.append(UInt8(ascii: ",")) }
      out.writeString(text)
    }
    out.append(UInt8(ascii: "]"))
  }

  public mutating func names(_ key: StaticString, _ value: inout [String], _ rule: WireText) {
    guard !value.isEmpty else { return }
    strings(key, &value, acceptSingle: false, nonEmpty: true)
  }

  public mutating func pushBool(_ key: StaticString, _ value: inout Bool) {
    bool(key, &value)
  }

  public mutating func pushInteger(_ key: StaticString, _ value: inout Int64) {
    integer(key, &value, 0...Int64.max)
  }

  public mutating func pushInteger(_ key: StaticString, _ value: inout Int64?) {
    integer(key, &value, 0...Int64.max)
  }

  public mutating func constant(_ key: StaticString, _ value: StaticString) {
    self.key(key)
    out.append(UInt8(ascii: "\""))
    out.append(value)
    out.append(UInt8(ascii: "\""))
  }

  public mutating func marker(_ key: StaticString, _ value: Int, missing problem: String) {
    self.key(key)
    out.writeInteger(Int64(value))
  }

  public mutating func precheck(_ key: StaticString, equals value: StaticString?, missing problem: String?) {}

  public mutating func derived(_ key: StaticString, _ value: @autoclosure () -> JSONValue) {
    self.key(key)
    out.write(value())
  }
}
