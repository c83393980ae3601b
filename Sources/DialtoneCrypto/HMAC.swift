internal import COpenSSL

public enum HMAC {
  /// HMAC-SHA1 survives only for protocols that mandate it (TURN REST credentials).
  public static func sha1(key: [UInt8], message: [UInt8]) -> [UInt8] {
    compute(digest: "SHA1", size: 20, key: key, message: message)
  }

  public static func sha256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    compute(digest: "SHA256", size: 32, key: key, message: message)
  }

  private static func compute(digest: String, size: Int, key: [UInt8], message: [UInt8]) -> [UInt8] {
    var mac = [UInt8](repeating: 0, count: size)
    var length = 0
    // EVP_Q_mac takes size_t lengths, unlike HMAC() whose int key length would need clamping.
    let result = OpenSSLSupport.withBytes(key) { keyBytes, keyCount in
      OpenSSLSupport.withBytes(message) { data, dataCount in
        EVP_Q_mac(nil, "HMAC", nil, digest, nil, keyBytes, keyCount, data, dataCount, &mac, size, &length)
      }
    }
    guard result != nil, length == size else { OpenSSLSupport.fatal("EVP_Q_mac(HMAC-\(digest))") }
    return mac
  }
}
