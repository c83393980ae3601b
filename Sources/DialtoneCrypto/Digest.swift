internal import COpenSSL

public enum SHA256 {
  public static let byteCount = 32

  public static func hash(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: byteCount)
    var length: UInt32 = 0
    let status = OpenSSLSupport.withBytes(bytes) { data, count in
      EVP_Digest(data, count, &digest, &length, EVP_sha256(), nil)
    }
    guard status == 1, Int(length) == byteCount else { OpenSSLSupport.fatal("EVP_Digest(SHA-256)") }
    return digest
  }
}
