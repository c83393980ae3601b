import DialtoneJSON

/// How strictly to validate while decoding.
public struct WireDecodingOptions: Sendable, Equatable {
  /// Enforce maximum sizes and character rules (`Limits`). Servers decode client input with
  /// this on; clients decode server output with it off, so a later server that raises a
  /// limit does not break older clients. Types and required fields are always checked.
  public var enforceLimits: Bool

  public init(enforceLimits: Bool) {
    self.enforceLimits = enforceLimits
  }

  /// Full validation (server decoding client input, HTTP request bodies).
  public static let strict = WireDecodingOptions(enforceLimits: true)
  /// Type checks only (client decoding server output).
  public static let lenient = WireDecodingOptions(enforceLimits: false)
}

/// A value with a fixed JSON object shape on the wire, described once.
///
/// `wire(_:)` names every field with its key and its rule; the same description decodes
/// (`WireDecoder`, straight from a `JSONTape` over the input bytes) and encodes
/// (`WireEncoder`, straight into output bytes). Fields are described in byte-wise key order,
/// which is the order they are written in (debug builds check it) and checked in.
///
/// Conforming types are also `Codable` through their JSON shape, so `JSONEncoder` /
/// `JSONDecoder` produce and accept exactly the wire format (slowly: use `MessageCodec`).
public protocol WireCodable: Sendable, Equatable, Codable {
  /// A value that exists only to be filled by a decoder: every field `wire` names is
  /// overwritten or reported missing before anyone sees it.
  init(wirePlaceholder: WirePlaceholder)
  /// Visits every field. A decoder fills them (throwing `ProtocolError`); an encoder reads
  /// them (and cannot fail).
  mutating func wire<Coder: WireCoder>(_ coder: inout Coder) throws(Coder.Failure)
}

/// The token `init(wirePlaceholder:)` takes: only decoders make one.
public struct WirePlaceholder: Sendable {}

/// The rules for one string field.
public struct WireText: Sendable {
  var minBytes: Int
  /// Enforced by strict decoding only.
  var maxBytes: Int?
  /// Exceeding `maxBytes` is `too-large` rather than `bad-request`.
  var tooLarge: Bool
  var isCallID: Bool

  public init(minBytes: Int = 1, maxBytes: Int? = nil, tooLarge: Bool = false) {
    self.init(minBytes: minBytes, maxBytes: maxBytes, tooLarge: tooLarge, isCallID: false)
  }

  init(minBytes: Int, maxBytes: Int?, tooLarge: Bool, isCallID: Bool) {
    self.minBytes = minBytes
    self.maxBytes = maxBytes
    self.tooLarge = tooLarge
    self.isCallID = isCallID
  }

  /// Any string, empty included.
  public static let any = WireText(minBytes: 0)
  /// A non-empty string.
  public static let nonEmpty = WireText()
  /// `CallIDRules` (length and characters) under strict decoding.
  public static let callId = WireText(minBytes: 1, maxBytes: nil, tooLarge: false, isCallID: true)
  public static let userId = WireText(maxBytes: Limits.maxUserIDBytes)
  public static let deviceId = WireText(maxBytes: Limits.maxDeviceIDBytes)
  public static let name = WireText(minBytes: 0, maxBytes: Limits.maxNameBytes)
  public static let sdp = WireText(maxBytes: Limits.maxSDPBytes, tooLarge: true)
  public static let messageId = WireText(maxBytes: Limits.maxMessageIDBytes)
  public static let sessionId = WireText(maxBytes: Limits.maxSessionIDBytes)
  public static let token = WireText(maxBytes: Limits.maxTokenBytes)
  public static let clientInfo = WireText(minBytes: 0, maxBytes: Limits.maxClientInfoBytes)
  public static let feature = WireText(maxBytes: Limits.maxFeatureBytes)
}

/// A string enumeration on the wire.
public protocol WireEnum: RawRepresentable<String>, CaseIterable, Sendable, Equatable {
  /// What strict decoding says about an unknown value, after the quoted field name.
  static var unknownValueProblem: String { get }
  /// What lenient decoding makes of an unknown value; nil: an error there too.
  static var lenientFallback: Self? { get }
}

extension WireEnum {
  public static var unknownValueProblem: String {
    "must be one of " + allCases.map(\.rawValue).joined(separator: ", ")
  }
  public static var lenientFallback: Self? { nil }
}

/// What a `WireCodable` describes its fields to. A field whose value is `null` counts as
/// absent; unknown keys are ignored.
public protocol WireCoder {
  associatedtype Failure: Error

  mutating func string(_ key: StaticString, _ value: inout String, _ rule: WireText) throws(Failure)
  mutating func string(_ key: StaticString, _ value: inout String?, _ rule: WireText) throws(Failure)
  mutating func bool(_ key: StaticString, _ value: inout Bool) throws(Failure)
  mutating func bool(_ key: StaticString, _ value: inout Bool?) throws(Failure)
  /// Absent on the wire means `absent`; written always.
  mutating func bool(_ key: StaticString, _ value: inout Bool, absent: Bool) throws(Failure)
  /// Absent means false; written only when true.
  mutating func flag(_ key: StaticString, _ value: inout Bool) throws(Failure)
  mutating func integer(_ key: StaticString, _ value: inout Int, _ range: ClosedRange<Int64>) throws(Failure)
  mutating func integer(_ key: StaticString, _ value: inout Int?, _ range: ClosedRange<Int64>) throws(Failure)
  mutating func integer(_ key: StaticString, _ value: inout Int64, _ range: ClosedRange<Int64>) throws(Failure)
  mutating func integer(_ key: StaticString, _ value: inout Int64?, _ range: ClosedRange<Int64>) throws(Failure)
  /// A seq value: 0...2^53-1.
  mutating func seq(_ key: StaticString, _ value: inout UInt64) throws(Failure)
  /// An optional number, integer or not, within `range` (strict decoding checks the range).
  mutating func decimal(_ key: StaticString, _ value: inout Double?, _ range: ClosedRange<Double>) throws(Failure)
  mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E) throws(Failure)
  mutating func enumeration<E: WireEnum>(_ key: StaticString, _ value: inout E?) throws(Failure)
  mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T) throws(Failure)
  mutating func object<T: WireCodable>(_ key: StaticString, _ value: inout T?) throws(Failure)
  mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]) throws(Failure)
  /// An optional array of objects: absent means nil; nil is not written.
  mutating func objects<T: WireCodable>(_ key: StaticString, _ value: inout [T]?) throws(Failure)
  /// An array of integers, each in `range`; absent means empty.
  mutating func integers(_ key: StaticString, _ value: inout [Int64], _ range: ClosedRange<Int64>) throws(Failure)
  /// An array of strings; with `acceptSingle`, a lone string is read as a one-element array.
  mutating func strings(_ key: StaticString, _ value: inout [String], acceptSingle: Bool, nonEmpty: Bool)
    throws(Failure)
  /// A list of names (protocol features): absent means empty, and an empty list is not
  /// written. Under strict decoding at most `Limits.maxFeatures` names of `rule`.
  mutating func names(_ key: StaticString, _ value: inout [String], _ rule: WireText) throws(Failure)
  /// Push data, where FCM makes every value a string: `true`/`false` or `"true"`/`"false"`/
  /// `"1"`/`"0"`; absent means false.
  mutating func pushBool(_ key: StaticString, _ value: inout Bool) throws(Failure)
  /// Push data: a non-negative integer, or its decimal string.
  mutating func pushInteger(_ key: StaticString, _ value: inout Int64) throws(Failure)
  /// Like `pushInteger`, absent allowed.
  mutating func pushInteger(_ key: StaticString, _ value: inout Int64?) throws(Failure)
  /// A string that must have exactly this value.
  mutating func constant(_ key: StaticString, _ value: StaticString) throws(Failure)
  /// A member that must be present, whatever its value; written as `value`.
  mutating func marker(_ key: StaticString, _ value: Int, missing problem: String) throws(Failure)
  /// Decoding only, before the fields (for a payload's header, whose faults must be reported
  /// before any field's): `key` must be present, else `problem`; with `equals`, a string of
  /// that value. The member itself is described in its place by `marker` or `constant`.
  mutating func precheck(_ key: StaticString, equals value: StaticString?, missing problem: String?) throws(Failure)
  /// A member derived from the others: written, ignored when decoding.
  mutating func derived(_ key: StaticString, _ value: @autoclosure () -> JSONValue) throws(Failure)
}

extension WireCodable {
  /// Decodes from UTF-8 JSON text.
  public init(jsonBytes: some Collection<UInt8>, options: WireDecodingOptions = .strict) throws(ProtocolError) {
    self = try WireDecoder.decode(Self.self, from: jsonBytes, options: options)
  }

  /// Decodes from a JSON value.
  public init(json: JSONValue, options: WireDecodingOptions = .strict) throws(ProtocolError) {
    try self.init(jsonBytes: json.serialized, options: options)
  }

  /// Compact JSON with sorted keys.
  public var jsonBytes: [UInt8] { WireEncoder.encode(self) }

  /// Compact JSON with sorted keys, as a string.
  public var jsonString: String { String(decoding: jsonBytes, as: UTF8.self) }

  /// The JSON shape of this value as a tree.
  public var json: JSONValue { JSONValue(parsing: jsonBytes) ?? .null }

  public init(from decoder: any Decoder) throws {
    let value = try JSONValue(from: decoder)
    try self.init(json: value, options: .strict)
  }

  public func encode(to encoder: any Encoder) throws {
    try json.encode(to: encoder)
  }
}
