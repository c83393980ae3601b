internal import COpenSSL
import Foundation

/// Owns one OpenSSL EVP_PKEY. Keys are never mutated after loading, and OpenSSL 3
/// allows concurrent signing and verification with a shared EVP_PKEY, hence Sendable.
final class EVPKey: @unchecked Sendable {
  private let pkey: OpaquePointer

  private init(owning pkey: OpaquePointer) {
    self.pkey = pkey
  }

  deinit {
    EVP_PKEY_free(pkey)
  }

  /// Reads PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") or SEC1 ("EC PRIVATE KEY").
  static func loadPrivate(pem: String) throws(JWTError) -> EVPKey {
    guard let key = readPrivate(normalized(pem)) else {
      throw .invalidKey("not an unencrypted PEM private key (\(OpenSSLSupport.drainErrors()))")
    }
    return key
  }

  /// Reads a SubjectPublicKeyInfo ("PUBLIC KEY"); a private key PEM is accepted
  /// too since it carries its public half.
  static func loadPublic(pem: String) throws(JWTError) -> EVPKey {
    let text = normalized(pem)
    let key = withMemoryBIO(text) { bio in
      PEM_read_bio_PUBKEY(bio, nil, { _, _, _, _ in 0 }, nil)
    }
    // The decoder may leave entries for the formats it tried, even on success.
    OpenSSLSupport.drainErrors()
    if let key { return EVPKey(owning: key) }
    guard let privateKey = readPrivate(text) else {
      throw .invalidKey("not a PEM public key (\(OpenSSLSupport.drainErrors()))")
    }
    return privateKey
  }

  private static func readPrivate(_ text: String) -> EVPKey? {
    // The passphrase callback refuses: OpenSSL's default would prompt on the terminal.
    let key = withMemoryBIO(text) { bio in
      PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
    }
    guard let key else { return nil }
    OpenSSLSupport.drainErrors()
    return EVPKey(owning: key)
  }

  static func generateP256() throws(JWTError) -> EVPKey {
    guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
      throw .invalidKey("EC key generation unavailable (\(OpenSSLSupport.drainErrors()))")
    }
    defer { EVP_PKEY_CTX_free(context) }
    var key: OpaquePointer?
    guard EVP_PKEY_keygen_init(context) > 0,
      EVP_PKEY_CTX_set_group_name(context, "P-256") > 0,
      EVP_PKEY_generate(context, &key) > 0,
      let key
    else {
      throw .invalidKey("EC key generation failed (\(OpenSSLSupport.drainErrors()))")
    }
    return EVPKey(owning: key)
  }

  func isA(_ type: String) -> Bool {
    EVP_PKEY_is_a(pkey, type) == 1
  }

  var bits: Int {
    Int(EVP_PKEY_get_bits(pkey))
  }

  /// True for NIST P-256, whichever of its names OpenSSL reports.
  var isP256: Bool {
    guard isA("EC") else { return false }
    var name = [CChar](repeating: 0, count: 64)
    var length = 0
    guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else {
      OpenSSLSupport.drainErrors()
      return false
    }
    let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return ["prime256v1", "P-256", "secp256r1"].contains(group)
  }

  func publicKeyPEM() -> String? {
    writePEM { bio in PEM_write_bio_PUBKEY(bio, pkey) }
  }

  /// PKCS#8 "PRIVATE KEY", the same shape as an Apple .p8 file.
  func privateKeyPEM() -> String? {
    writePEM { bio in PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) }
  }

  /// The raw output of EVP_DigestSign with SHA-256: PKCS#1 v1.5 for RSA, DER ECDSA-Sig for EC.
  func signSHA256(_ message: [UInt8]) -> [UInt8]? {
    guard let context = EVP_MD_CTX_new() else { return nil }
    defer { EVP_MD_CTX_free(context) }
    let capacity = Int(EVP_PKEY_get_size(pkey))
    guard capacity > 0 else { return nil }
    var signature = [UInt8](repeating: 0, count: capacity)
    var length = capacity
    let signed = OpenSSLSupport.withBytes(message) { data, count in
      EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pkey) == 1
        && EVP_DigestSign(context, &signature, &length, data, count) == 1
    }
    guard signed, length <= capacity else {
      OpenSSLSupport.drainErrors()
      return nil
    }
    return Array(signature.prefix(length))
  }

  func verifySHA256(_ message: [UInt8], signature: [UInt8]) -> Bool {
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    let valid = OpenSSLSupport.withBytes(message) { data, count in
      OpenSSLSupport.withBytes(signature) { sig, sigCount in
        EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pkey) == 1
          && EVP_DigestVerify(context, sig, sigCount, data, count) == 1
      }
    }
    if !valid { OpenSSLSupport.drainErrors() }
    return valid
  }

  /// Service-account JSON copied through environment variables often keeps `\n`
  /// escapes literally; a real PEM never contains a backslash, so unescaping is safe.
  private static func normalized(_ pem: String) -> String {
    pem.replacingOccurrences(of: "\\n", with: "\n")
  }

  private static func withMemoryBIO<R>(_ text: String, _ body: (OpaquePointer) -> R?) -> R? {
    let bytes = Array(text.utf8)
    guard !bytes.isEmpty, bytes.count < Int(Int32.max) else { return nil }
    return bytes.withUnsafeBytes { raw -> R? in
      guard let base = raw.baseAddress, let bio = BIO_new_mem_buf(base, Int32(raw.count)) else { return nil }
      defer { BIO_free_all(bio) }
      return body(bio)
    }
  }

  /// Lends the EVP_PKEY to other OpenSSL calls of this module.
  func withPointer<R>(_ body: (OpaquePointer) -> R) -> R {
    body(pkey)
  }

  func writePEM(_ write: (OpaquePointer) -> Int32) -> String? {
    guard let bio = BIO_new(BIO_s_mem()) else { return nil }
    defer { BIO_free_all(bio) }
    guard write(bio) == 1 else {
      OpenSSLSupport.drainErrors()
      return nil
    }
    var text: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = BIO_read(bio, &chunk, Int32(chunk.count))
      if count <= 0 { break }
      text.append(contentsOf: chunk.prefix(Int(count)))
    }
    OpenSSLSupport.drainErrors()
    return String(decoding: text, as: UTF8.self)
  }
}
