import DialtoneJSON

/// Encoding and decoding of whole signaling frames and HTTP bodies, straight between bytes
/// and typed values (see `WireCodable`).
///
/// Server side: `decodeClientMessage` + `encode(_:seq:)` (or `ServerFrame` for fan-out).
/// Client side: `encode(_:id:)` + `decodeServerMessage`.
/// Output is compact UTF-8 JSON with keys sorted byte-wise. Inputs may be `[UInt8]`,
/// `ArraySlice<UInt8>`, `Data`, `String.UTF8View` or any other byte collection.
public enum MessageCodec {
  // MARK: Server side

  /// Decodes one client frame. Frames larger than `Limits.maxMessageBytes` fail with
  /// `too-large`, malformed JSON with `bad-request`; when the frame carried a valid `id`
  /// the error's `replyTo` holds it.
  public static func decodeClientMessage(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> ClientEnvelope {
    var scratch = DecodingScratch()
    return try decodeClientMessage(bytes, scratch: &scratch)
  }

  /// What decoding one frame leaves for the next, to decode it with fewer allocations: the
  /// room of the parsed frame's tape. One per thread that decodes frames one after another
  /// (the server's network thread); never shared.
  public struct DecodingScratch {
    var tape = JSONTape.Scratch()

    public init() {}
  }

  /// `decodeClientMessage(_:)`, reusing `scratch` (the same result, the same errors).
  public static func decodeClientMessage(
    _ bytes: some Collection<UInt8>, scratch: inout DecodingScratch
  ) throws(ProtocolError) -> ClientEnvelope {
    let count = bytes.count
    if count == 0 { throw ProtocolError(.badRequest, "empty message") }
    if count > Limits.maxMessageBytes {
      throw ProtocolError(.tooLarge, "message exceeds \(Limits.maxMessageBytes) bytes")
    }
    return try JSONTape.parse(
      bytes, maxDepth: Limits.maxJSONDepth, scratch: &scratch.tape, syntaxError: WireDecoder.malformed
    ) { (tape: JSONTape) throws(ProtocolError) -> ClientEnvelope in
      try ClientEnvelope.decode(tape, options: .strict)
    }
  }

  public static func decodeClientMessage(_ text: String) throws(ProtocolError) -> ClientEnvelope {
    try decodeClientMessage(text.utf8)
  }

  /// The `id` of a client frame, read for an answer that refuses the frame unseen (a
  /// rate-limited message): nil when it has none.
  public static func requestID(of bytes: some Collection<UInt8>) -> String? {
    do {
      return try decodeClientMessage(bytes).id
    } catch {
      return error.replyTo
    }
  }

  /// Encodes a server message; `seq` is nil only for `welcome` and pre-session errors.
  public static func encode(_ message: ServerMessage, seq: UInt64?) -> [UInt8] {
    // The two relay frames straight from the message: an envelope made around it first copied
    // the message in (and destroyed the copy after), on every relayed frame.
    ServerEnvelope.relayFrameBytes(of: message, seq: seq) ?? ServerEnvelope(seq: seq, message: message).genericEncoded
  }

  public static func encode(_ envelope: ServerEnvelope) -> [UInt8] {
    envelope.encoded
  }

  /// `encode(_:seq:)` as a `String`.
  public static func encodeString(_ message: ServerMessage, seq: UInt64?) -> String {
    String(decoding: encode(message, seq: seq), as: UTF8.self)
  }

  // MARK: Client side

  /// Encodes a client message; `id` is nil only for `ack`.
  public static func encode(_ message: ClientMessage, id: String?) -> [UInt8] {
    ClientEnvelope(id: id, message: message).encoded
  }

  public static func encode(_ envelope: ClientEnvelope) -> [UInt8] {
    envelope.encoded
  }

  /// `encode(_:id:)` as a `String` (for text-frame APIs).
  public static func encodeString(_ message: ClientMessage, id: String?) -> String {
    String(decoding: encode(message, id: id), as: UTF8.self)
  }

  /// `encode(_:)` as a `String`.
  public static func encodeString(_ envelope: ClientEnvelope) -> String {
    String(decoding: encode(envelope), as: UTF8.self)
  }

  /// Decodes one server frame. By default lenient (`WireDecodingOptions.lenient`): unknown
  /// message types become `.unknown`, unknown end reasons `failed`, unknown error codes
  /// `internal`, and size limits are not enforced. When decoding fails after a valid `seq`
  /// was read, the error's `seq` holds it: acknowledge it anyway.
  public static func decodeServerMessage(
    _ bytes: some Collection<UInt8>, options: WireDecodingOptions = .lenient
  ) throws(ProtocolError) -> ServerEnvelope {
    if bytes.isEmpty { throw ProtocolError(.badRequest, "empty message") }
    return try JSONTape.parse(bytes, maxDepth: Limits.maxJSONDepth, syntaxError: WireDecoder.malformed) {
      (tape: JSONTape) throws(ProtocolError) -> ServerEnvelope in
      try ServerEnvelope.decode(tape, options: options)
    }
  }

  public static func decodeServerMessage(
    _ text: String, options: WireDecodingOptions = .lenient
  ) throws(ProtocolError) -> ServerEnvelope {
    try decodeServerMessage(text.utf8, options: options)
  }

  // MARK: HTTP bodies and other values

  /// Compact JSON with sorted keys for any wire value (HTTP bodies, push payloads).
  public static func encode(_ value: some WireCodable) -> [UInt8] {
    WireEncoder.encode(value)
  }

  /// Decodes an HTTP body or other wire value; strict by default.
  public static func decode<T: WireCodable>(
    _ type: T.Type, from bytes: some Collection<UInt8>, options: WireDecodingOptions = .strict
  ) throws(ProtocolError) -> T {
    try WireDecoder.decode(T.self, from: bytes, options: options)
  }
}
