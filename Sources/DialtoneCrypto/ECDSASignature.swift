internal import COpenSSL

/// JOSE carries ECDSA signatures as fixed-width r||s (RFC 7518 §3.4) while
/// OpenSSL produces and expects DER ECDSA-Sig-Value; these convert between them.
enum ECDSASignature {
  static func jose(fromDER der: [UInt8], coordinateSize: Int) -> [UInt8]? {
    der.withUnsafeBufferPointer { buffer -> [UInt8]? in
      var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
      guard cursor != nil, let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else {
        OpenSSLSupport.drainErrors()
        return nil
      }
      defer { ECDSA_SIG_free(signature) }
      var r: OpaquePointer?
      var s: OpaquePointer?
      ECDSA_SIG_get0(signature, &r, &s)
      guard let r, let s else { return nil }
      var output = [UInt8](repeating: 0, count: 2 * coordinateSize)
      let width = Int32(coordinateSize)
      let written = output.withUnsafeMutableBufferPointer { out -> Bool in
        guard let base = out.baseAddress else { return false }
        return BN_bn2binpad(r, base, width) == width && BN_bn2binpad(s, base + coordinateSize, width) == width
      }
      return written ? output : nil
    }
  }

  static func der(fromJOSE jose: [UInt8], coordinateSize: Int) -> [UInt8]? {
    guard jose.count == 2 * coordinateSize else { return nil }
    return jose.withUnsafeBufferPointer { buffer -> [UInt8]? in
      guard let base = buffer.baseAddress, let signature = ECDSA_SIG_new() else { return nil }
      defer { ECDSA_SIG_free(signature) }
      let width = Int32(coordinateSize)
      guard let r = BN_bin2bn(base, width, nil) else { return nil }
      guard let s = BN_bin2bn(base + coordinateSize, width, nil) else {
        BN_free(r)
        return nil
      }
      // On success ECDSA_SIG_set0 takes ownership of r and s.
      guard ECDSA_SIG_set0(signature, r, s) == 1 else {
        BN_free(r)
        BN_free(s)
        return nil
      }
      let length = i2d_ECDSA_SIG(signature, nil)
      guard length > 0 else { return nil }
      var der = [UInt8](repeating: 0, count: Int(length))
      let written = der.withUnsafeMutableBufferPointer { out -> Int32 in
        var cursor = out.baseAddress
        return i2d_ECDSA_SIG(signature, &cursor)
      }
      return written == length ? der : nil
    }
  }
}
