import DialtoneCrypto
import Testing

@Suite struct Base64URLTests {
  /// RFC 4648 §10.
  static let rfc4648: [(String, String)] = [
    ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
    ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
  ]

  @Test func rfc4648StandardVectors() {
    for (plain, encoded) in Self.rfc4648 {
      #expect(Base64.encode(utf8(plain)) == encoded)
      #expect(Base64.decode(encoded) == utf8(plain))
    }
  }

  @Test func rfc4648URLVectorsWithoutPadding() {
    for (plain, encoded) in Self.rfc4648 {
      let unpadded = String(encoded.filter { $0 != "=" })
      #expect(Base64URL.encode(utf8(plain)) == unpadded)
      #expect(Base64URL.decode(unpadded) == utf8(plain), "unpadded \(unpadded)")
      #expect(Base64URL.decode(encoded) == utf8(plain), "padded \(encoded)")
    }
  }

  /// RFC 4648 §9 examples, which exercise the two characters that differ between alphabets.
  @Test func urlSafeAlphabet() {
    #expect(Base64.encode(hex("14fb9c03d97e")) == "FPucA9l+")
    #expect(Base64URL.encode(hex("14fb9c03d97e")) == "FPucA9l-")
    #expect(Base64URL.encode(hex("14fb9c03d9")) == "FPucA9k")
    #expect(Base64URL.encode(hex("14fb9c03")) == "FPucAw")
    #expect(Base64URL.encode([0xfb, 0xff, 0xbf]) == "-_-_")
    #expect(Base64URL.decode("-_-_") == [0xfb, 0xff, 0xbf])
    #expect(Base64.decode("+/+/") == [0xfb, 0xff, 0xbf])
  }

  @Test(arguments: [
    "Zm9v!", "Zm9v+", "Zm9v/", "Zm 9v", "Zm9v\n", "Zm9vY", "Z", "Zh", "Zm9=", "Zg=", "Z===", "Zg==Zg==", "Zg===",
    "=", "Zm9vé",
  ])
  func rejectsInvalidBase64URL(_ text: String) {
    #expect(Base64URL.decode(text) == nil)
  }

  @Test func standardDecoderRejectsURLAlphabet() {
    #expect(Base64.decode("-_-_") == nil)
  }

  @Test func roundTripsEveryLength() {
    for length in 0...70 {
      let bytes = SecureRandom.bytes(length)
      #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
      #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }
  }
}
