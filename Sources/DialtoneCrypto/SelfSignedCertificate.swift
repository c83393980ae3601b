internal import COpenSSL
import Foundation

/// A self-signed ECDSA P-256 certificate and its key, in PEM: what a DTLS endpoint presents in
/// WebRTC (peers check its fingerprint from the SDP, not a chain). ECDSA, because some stacks
/// (aiortc) refuse RSA-authenticated DTLS, and because a P-256 key takes a millisecond where
/// an RSA key can take half a second on the first call.
public struct SelfSignedCertificate: Sendable {
  public let certificatePEM: String
  public let privateKeyPEM: String
  /// The SHA-256 fingerprint as SDP's `a=fingerprint:sha-256` writes it (AB:CD:...).
  public let sha256Fingerprint: String

  /// Certificate then key, the form GStreamer's DTLS elements take.
  public var combinedPEM: String { certificatePEM + privateKeyPEM }

  public static func generate(commonName: String = "dialtone", validDays: Int = 30) throws(JWTError)
    -> SelfSignedCertificate
  {
    let key = try EVPKey.generateP256()
    guard let certificate = X509_new() else { throw .invalidKey("X509_new failed") }
    defer { X509_free(certificate) }
    var serial = [UInt8](repeating: 0, count: 8)
    _ = RAND_bytes(&serial, Int32(serial.count))
    let signed = key.withPointer { pkey -> Bool in
      guard X509_set_version(certificate, 2) == 1,
        ASN1_INTEGER_set(
          X509_get_serialNumber(certificate), Int(serial.reduce(0) { ($0 << 8) | Int($1) } & 0x7fff_ffff)) == 1,
        X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil,
        X509_gmtime_adj(X509_getm_notAfter(certificate), validDays * 86_400) != nil,
        X509_set_pubkey(certificate, pkey) == 1,
        let name = X509_get_subject_name(certificate),
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
        X509_set_issuer_name(certificate, name) == 1
      else { return false }
      return X509_sign(certificate, pkey, EVP_sha256()) > 0
    }
    var digest = [UInt8](repeating: 0, count: 32)
    var digestLength: UInt32 = 0
    guard signed,
      X509_digest(certificate, EVP_sha256(), &digest, &digestLength) == 1, digestLength == 32,
      let certificatePEM = key.writePEM({ bio in PEM_write_bio_X509(bio, certificate) }),
      let privateKeyPEM = key.privateKeyPEM()
    else {
      throw .invalidKey("self-signed certificate: \(OpenSSLSupport.drainErrors())")
    }
    let fingerprint = digest.map { String(format: "%02X", $0) }.joined(separator: ":")
    return SelfSignedCertificate(
      certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM, sha256Fingerprint: fingerprint)
  }
}
