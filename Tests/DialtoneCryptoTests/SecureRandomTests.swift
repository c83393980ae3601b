import DialtoneCrypto
import Testing

@Suite struct SecureRandomTests {
  @Test func producesRequestedLengths() {
    #expect(SecureRandom.bytes(0).isEmpty)
    #expect(SecureRandom.bytes(-1).isEmpty)
    #expect(SecureRandom.bytes(1).count == 1)
    #expect(SecureRandom.bytes(4096).count == 4096)
  }

  @Test func outputsDiffer() {
    #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
    #expect(SecureRandom.token() != SecureRandom.token())
  }

  @Test func tokenIsURLSafe() {
    let token = SecureRandom.token()
    #expect(token.count == 43)
    let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    #expect(token.allSatisfy { allowed.contains($0) })
    #expect(Base64URL.decode(token)?.count == 32)
    #expect(SecureRandom.token(byteCount: 16).count == 22)
  }
}
