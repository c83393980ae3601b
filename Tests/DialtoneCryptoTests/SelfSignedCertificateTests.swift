import DialtoneCrypto
import Foundation
import Testing

@Suite struct SelfSignedCertificateTests {
  @Test func aCertificateComesWithItsKeyAndItsSDPFingerprint() throws {
    let certificate = try SelfSignedCertificate.generate(commonName: "dialtone-test")
    #expect(certificate.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
    #expect(certificate.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    // The key is a P-256 key (usable for ES256 too).
    _ = try JWTSigner.es256(pkcs8PEM: certificate.privateKeyPEM)
    // The fingerprint is SHA-256 over the DER certificate: 32 upper-case hex pairs.
    let pairs = certificate.sha256Fingerprint.split(separator: ":")
    #expect(pairs.count == 32 && pairs.allSatisfy { $0.count == 2 && $0.uppercased() == $0 })
    let base64 = certificate.certificatePEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    let der = try #require(Data(base64Encoded: base64))
    let digest = SHA256.hash(Array(der)).map { String(format: "%02X", $0) }.joined(separator: ":")
    #expect(digest == certificate.sha256Fingerprint)
    // Two certificates are two identities.
    #expect(try SelfSignedCertificate.generate().sha256Fingerprint != certificate.sha256Fingerprint)
  }
}
