import DialtoneCrypto
import Testing

@Suite struct DigestTests {
  @Test func sha256KnownAnswers() {
    #expect(hexString(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    #expect(hexString(SHA256.hash(utf8("abc"))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(
      hexString(SHA256.hash(utf8("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")))
        == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
  }

  static let blockSizeKey = [UInt8](repeating: 0xaa, count: 131)

  /// RFC 4231 §4 test cases 1-4, 6 and 7 (case 5 is a truncated output).
  static let rfc4231: [(key: [UInt8], data: [UInt8], mac: String)] = [
    (
      [UInt8](repeating: 0x0b, count: 20), utf8("Hi There"),
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    ),
    (
      utf8("Jefe"), utf8("what do ya want for nothing?"),
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    ),
    (
      [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
      "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
    ),
    (
      Array(1...25), [UInt8](repeating: 0xcd, count: 50),
      "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
    ),
    (
      blockSizeKey, utf8("Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    ),
    (
      blockSizeKey,
      utf8(
        "This is a test using a larger than block-size key and a larger than block-size data."
          + " The key needs to be hashed before being used by the HMAC algorithm."),
      "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
    ),
  ]

  @Test func hmacSHA256RFC4231() {
    for (index, vector) in Self.rfc4231.enumerated() {
      #expect(hexString(HMAC.sha256(key: vector.key, message: vector.data)) == vector.mac, "vector \(index)")
    }
  }

  /// RFC 2202 §3 test cases 1-7.
  static let rfc2202: [(key: [UInt8], data: [UInt8], mac: String)] = [
    ([UInt8](repeating: 0x0b, count: 20), utf8("Hi There"), "b617318655057264e28bc0b6fb378c8ef146be00"),
    (utf8("Jefe"), utf8("what do ya want for nothing?"), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
    (
      [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
      "125d7342b9ac11cd91a39af48aa17b4f63f175d3"
    ),
    (Array(1...25), [UInt8](repeating: 0xcd, count: 50), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"),
    ([UInt8](repeating: 0x0c, count: 20), utf8("Test With Truncation"), "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"),
    (
      [UInt8](repeating: 0xaa, count: 80), utf8("Test Using Larger Than Block-Size Key - Hash Key First"),
      "aa4ae5e15272d00e95705637ce8a3b55ed402112"
    ),
    (
      [UInt8](repeating: 0xaa, count: 80),
      utf8("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data"),
      "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"
    ),
  ]

  @Test func hmacSHA1RFC2202() {
    for (index, vector) in Self.rfc2202.enumerated() {
      #expect(hexString(HMAC.sha1(key: vector.key, message: vector.data)) == vector.mac, "vector \(index)")
    }
  }

  /// Empty buffers reach OpenSSL as zero-length regions, not NULL.
  @Test func hmacWithEmptyKeyAndMessage() {
    #expect(
      hexString(HMAC.sha256(key: [], message: []))
        == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
  }

  @Test func constantTimeEquals() {
    #expect(ConstantTime.equals([], []))
    #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
    #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
    #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
    #expect(!ConstantTime.equals([], [0]))
  }
}
