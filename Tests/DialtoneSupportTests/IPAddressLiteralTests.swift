import DialtoneSupport
import Testing

@Suite struct IPAddressLiteralTests {
  @Test func addressesAreLiteralsAndNamesAreNot() {
    for host in ["127.0.0.1", "0.0.0.0", "::1", "2001:db8::1", "::ffff:10.0.0.1"] {
      #expect(IPAddressLiteral.matches(host), "\(host)")
    }
    for host in ["localhost", "api.push.apple.com", "", "[::1]", "127.0.0.1.nip.io", "256.0.0.1", "1.2.3", "::1%lo"] {
      #expect(!IPAddressLiteral.matches(host), "\(host)")
    }
  }
}
