/// A compact JWS split into its parts, with the payload left undecoded so no
/// claim is parsed before the signature has been checked.
import DialtoneJSON

struct JWTCompact {
  /// Nesting limit for header and payload JSON.
  static let maxJSONDepth = 64

  let header: [String: JSONValue]
  let signingInput: [UInt8]
  let payloadSegment: ArraySlice<UInt8>
  let signature: [UInt8]

  /// Splits on bytes, not Characters: a "." fused with a combining mark is one
  /// Character, and the signing input must be exactly the bytes that were signed.
  static func parse(_ token: String) throws(JWTError) -> JWTCompact {
    let bytes = Array(token.utf8)
    let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    guard segments.count == 3, !segments[0].isEmpty, !segments[1].isEmpty else { throw .malformed }
    guard let headerBytes = Base64URL.decodeUnpadded(segments[0]),
      let header = JSONValue(parsing: headerBytes, maxDepth: Self.maxJSONDepth)?.objectValue,
      let signature = Base64URL.decodeUnpadded(segments[2])
    else { throw .malformed }
    return JWTCompact(
      header: header,
      signingInput: Array(bytes[segments[0].startIndex..<segments[1].endIndex]),
      payloadSegment: segments[1],
      signature: signature)
  }

  func payload() throws(JWTError) -> [String: JSONValue] {
    guard let bytes = Base64URL.decodeUnpadded(payloadSegment),
      let object = JSONValue(parsing: bytes, maxDepth: Self.maxJSONDepth)?.objectValue
    else { throw .malformed }
    return object
  }
}
