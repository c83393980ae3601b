import DialtoneJSON
import Foundation

/// Encoding and decoding of whole signaling frames and HTTP bodies.
///
/// Server side: `decodeClientMessage` + `encode(_:seq:)`.
/// Client side: `encode(_:)` + `decodeServerMessage`.
/// Output is compact UTF-8 JSON with keys sorted byte-wise. Inputs may be `[UInt8]`,
/// `ArraySlice<UInt8>`, `Data`, `String.UTF8View` or any other byte collection.
public enum MessageCodec {
  // MARK: Server side

  /// Decodes one client frame. Frames larger than `Limits.maxMessageBytes` fail with
  /// `too-large`, malformed JSON with `bad-request`; when the frame carried a valid `id`
  /// the error's `replyTo` holds it.
  public static func decodeClientMessage(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> ClientMessage {
    let value = try parseFrame(bytes)
    return try ClientMessage(json: value, path: "", options: .strict)
  }

  public static func decodeClientMessage(_ text: String) throws(ProtocolError) -> ClientMessage {
    try decodeClientMessage(text.utf8)
  }

  /// Encodes a server message; `seq` is nil only for `welcome` and pre-session errors.
  public static func encode(_ message: ServerMessage, seq: UInt64?) -> [UInt8] {
    message.json(seq: seq).serialized
  }

  public static func encode(_ envelope: ServerEnvelope) -> [UInt8] {
    envelope.json.serialized
  }

  // MARK: Client side

  public static func encode(_ message: ClientMessage) -> [UInt8] {
    message.json.serialized
  }

  /// `encode(_:)` as a `String` (for text-frame APIs).
  public static func encodeString(_ message: ClientMessage) -> String {
    String(decoding: encode(message), as: UTF8.self)
  }

  /// `encode(_:seq:)` as a `String`.
  public static func encodeString(_ message: ServerMessage, seq: UInt64?) -> String {
    String(decoding: encode(message, seq: seq), as: UTF8.self)
  }

  /// Decodes one server frame. By default lenient (`WireDecodingOptions.lenient`): unknown
  /// message types become `.unknown`, unknown end reasons `failed`, unknown error codes
  /// `internal`, and size limits are not enforced. When decoding fails after a valid `seq`
  /// was read, the error's `seq` holds it: acknowledge it anyway.
  public static func decodeServerMessage(
    _ bytes: some Collection<UInt8>, options: WireDecodingOptions = .lenient
  ) throws(ProtocolError) -> ServerEnvelope {
    if bytes.isEmpty { throw ProtocolError(.badRequest, "empty message") }
    let value: JSONValue
    do {
      value = try JSONValue.parse(bytes, maxDepth: Limits.maxJSONDepth)
    } catch {
      throw ProtocolError(.badRequest, "malformed JSON: \(error)")
    }
    return try ServerEnvelope(json: value, path: "", options: options)
  }

  public static func decodeServerMessage(
    _ text: String, options: WireDecodingOptions = .lenient
  ) throws(ProtocolError) -> ServerEnvelope {
    try decodeServerMessage(text.utf8, options: options)
  }

  // MARK: HTTP bodies and other values

  /// Compact JSON with sorted keys for any wire value (HTTP bodies, push payloads).
  public static func encode(_ value: some WireCodable) -> [UInt8] {
    value.json.serialized
  }

  /// Decodes an HTTP body or other wire value; strict by default.
  public static func decode<T: WireCodable>(
    _ type: T.Type, from bytes: some Collection<UInt8>, options: WireDecodingOptions = .strict
  ) throws(ProtocolError) -> T {
    if bytes.isEmpty { throw ProtocolError(.badRequest, "empty body") }
    let value: JSONValue
    do {
      value = try JSONValue.parse(bytes, maxDepth: Limits.maxJSONDepth)
    } catch {
      throw ProtocolError(.badRequest, "malformed JSON: \(error)")
    }
    return try T(json: value, path: "", options: options)
  }

  // MARK: Private

  private static func parseFrame(_ bytes: some Collection<UInt8>) throws(ProtocolError) -> JSONValue {
    let count = bytes.count
    if count == 0 { throw ProtocolError(.badRequest, "empty message") }
    if count > Limits.maxMessageBytes {
      throw ProtocolError(.tooLarge, "message exceeds \(Limits.maxMessageBytes) bytes")
    }
    do {
      return try JSONValue.parse(bytes, maxDepth: Limits.maxJSONDepth)
    } catch {
      throw ProtocolError(.badRequest, "malformed JSON: \(error)")
    }
  }
}
