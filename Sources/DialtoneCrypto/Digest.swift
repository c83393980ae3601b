internal import COpenSSL

public enum SHA256 {
  public static let byteCount = 32

  public static func hash(_ bytes: [UInt8]) -> [UInt8] {
    evpDigest(bytes, EVP_sha256(), byteCount: byteCount, name: "SHA-256")
  }
}

/// SHA-1 only where a protocol names it (Redis's EVALSHA script ids): never for security.
public enum SHA1 {
  public static let byteCount = 20

  public static func hash(_ bytes: [UInt8]) -> [UInt8] {
    evpDigest(bytes, EVP_sha1(), byteCount: byteCount, name: "SHA-1")
  }
}

/// One-shot EVP digest; a failure here means OpenSSL itself is broken.
private func evpDigest(_ bytes: [UInt8], _ type: OpaquePointer?, byteCount: Int, name: String) -> [UInt8] {
  var digest = [UInt8](repeating: 0, count: byteCount)
  var length: UInt32 = 0
  let status = OpenSSLSupport.withBytes(bytes) { data, count in
    EVP_Digest(data, count, &digest, &length, type, nil)
  }
  guard status == 1, Int(length) == byteCount else { OpenSSLSupport.fatal("EVP_Digest(\(name))") }
  return digest
}
