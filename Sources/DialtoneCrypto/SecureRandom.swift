internal import COpenSSL

public enum SecureRandom {
  /// Bytes from OpenSSL's CSPRNG. A CSPRNG failure stops the process: returning
  /// anything would hand out guessable secrets.
  public static func bytes(_ count: Int) -> [UInt8] {
    guard count > 0 else { return [] }
    var output = [UInt8](repeating: 0, count: count)
    output.withUnsafeMutableBufferPointer { buffer in
      guard let base = buffer.baseAddress else { return }
      var offset = 0
      while offset < buffer.count {
        let chunk = min(buffer.count - offset, Int(Int32.max))
        guard RAND_bytes(base + offset, Int32(chunk)) == 1 else { OpenSSLSupport.fatal("RAND_bytes") }
        offset += chunk
      }
    }
    return output
  }

  /// A URL- and header-safe random string; 32 bytes gives 256 bits of entropy.
  public static func token(byteCount: Int = 32) -> String {
    Base64URL.encode(bytes(byteCount))
  }
}
