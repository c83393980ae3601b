import DialtoneCrypto
import DialtoneJSON
import Foundation

private let verifier = JWTVerifier(hs256Secret: Array("fuzzing-secret-0123456789".utf8))
private let signer = JWTSigner.hs256(secret: Array("fuzzing-secret-0123456789".utf8))

extension FuzzTargets {
  /// Tokens as `hello` and `Authorization` carry them: verification never crashes, and only a
  /// token this key signed passes. Inputs starting with `{` are claims: signed, then verified.
  public static func jwt(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    if bytes.first == UInt8(ascii: "{") {
      guard case .object(let object) = JSONValue(parsing: bytes),
        let token = try? signer.sign(claims: JWTClaims(object))
      else { return }
      _ = try? verifier.verify(token, now: now)
      return
    }
    _ = try? verifier.verify(String(decoding: bytes, as: UTF8.self), now: now)
    return
  }
}
