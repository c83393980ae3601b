internal import COpenSSL

public enum ConstantTime {
  /// Compares without an early exit so timing reveals nothing about where inputs differ.
  /// Lengths are compared openly: MAC lengths are public.
  public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    guard !lhs.isEmpty else { return true }
    return lhs.withUnsafeBytes { left in
      rhs.withUnsafeBytes { right in
        CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
      }
    }
  }
}
