/// Statement parameters laid out as PQexecParams wants them. Text goes in text format (NUL-terminated:
/// libpq ignores lengths for text), bytes in binary format, so no value is ever spliced into SQL.
struct PostgresParameters {
  /// The protocol counts parameters in 16 bits.
  static let maximumCount = 65535

  let types: [UInt32]
  let lengths: [Int32]
  let formats: [Int32]
  /// Where each value starts in `storage`; nil for NULL.
  private let offsets: [Int?]
  /// Every value back to back. Never empty, so that a zero-length value still gets a non-nil
  /// pointer (libpq reads a nil value pointer as NULL).
  private let storage: [UInt8]

  var count: Int32 { Int32(types.count) }

  init(_ values: [PostgresValue]) throws(PostgresError) {
    guard values.count <= Self.maximumCount else {
      throw .invalidRequest("\(values.count) parameters (at most \(Self.maximumCount))")
    }
    var storage: [UInt8] = [0]
    var types: [UInt32] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var offsets: [Int?] = []
    for (index, value) in values.enumerated() {
      let encoded = Self.encode(value)
      types.append(encoded.type)
      formats.append(encoded.binary ? 1 : 0)
      guard let bytes = encoded.bytes else {
        offsets.append(nil)
        lengths.append(0)
        continue
      }
      if !encoded.binary && bytes.contains(0) {
        throw .invalidRequest("parameter $\(index + 1) contains a NUL byte, which PostgreSQL text cannot hold")
      }
      guard bytes.count <= Int32.max else { throw .invalidRequest("parameter $\(index + 1) is too large") }
      offsets.append(storage.count)
      lengths.append(Int32(bytes.count))
      storage += bytes
      if !encoded.binary { storage.append(0) }
    }
    self.storage = storage
    self.types = types
    self.lengths = lengths
    self.formats = formats
    self.offsets = offsets
  }

  /// Calls `body` with the array of value pointers, valid only during the call.
  func withValuePointers<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    storage.withUnsafeBytes { raw in
      let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in
        guard let offset, let base = raw.baseAddress else { return nil }
        return (base + offset).assumingMemoryBound(to: CChar.self)
      }
      return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
    }
  }

  private static func encode(_ value: PostgresValue) -> (type: UInt32, binary: Bool, bytes: [UInt8]?) {
    switch value {
    case .null: (PostgresType.unknown, false, nil)
    // Unknown, not text: the server infers the type from the context, so a string binds to a
    // uuid, timestamptz or jsonb column as it would in a literal.
    case .text(let text): (PostgresType.unknown, false, Array(text.utf8))
    case .int64(let number): (PostgresType.int8, false, Array(String(number).utf8))
    case .bool(let flag): (PostgresType.bool, false, Array((flag ? "t" : "f").utf8))
    case .double(let number): (PostgresType.float8, false, Array(floatText(number).utf8))
    case .bytes(let bytes): (PostgresType.bytea, true, bytes)
    }
  }

  /// float8's input syntax; Swift spells the special values "inf" and "nan".
  static func floatText(_ number: Double) -> String {
    if number.isNaN { return "NaN" }
    if number.isInfinite { return number < 0 ? "-Infinity" : "Infinity" }
    return "\(number)"
  }
}
