import DialtoneCrypto
import DialtoneJSON
import Foundation

func hex(_ text: String) -> [UInt8] {
  let digits = Array(text.utf8)
  precondition(digits.count % 2 == 0, "odd-length hex in a test vector")
  return stride(from: 0, to: digits.count, by: 2).map { index in
    guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
      preconditionFailure("bad hex in a test vector")
    }
    return byte
  }
}

func hexString(_ bytes: [UInt8]) -> String {
  bytes.map { String(format: "%02x", $0) }.joined()
}

func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

/// An HS256 token over arbitrary header and payload text, so rejection tests can
/// put anything past the signature check.
func craftHS256(header: String, payload: String, secret: [UInt8]) -> String {
  let input = Base64URL.encode(utf8(header)) + "." + Base64URL.encode(utf8(payload))
  return input + "." + Base64URL.encode(HMAC.sha256(key: secret, message: utf8(input)))
}

/// Decodes one segment of a compact token as a JSON object.
func segmentObject(_ token: String, _ index: Int) -> [String: JSONValue]? {
  let segments = token.split(separator: ".", omittingEmptySubsequences: false)
  guard segments.count == 3, let bytes = Base64URL.decode(String(segments[index])) else { return nil }
  return JSONValue(parsing: bytes)?.objectValue
}

/// Replaces one segment of a compact token.
func replacingSegment(_ token: String, _ index: Int, with segment: String) -> String {
  var segments = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
  segments[index] = segment
  return segments.joined(separator: ".")
}
