import DialtoneCrypto
import DialtoneJSON
import Foundation
import Testing

@Suite struct JWTClaimsTests {
  @Test func numericDates() {
    #expect(JSONValue.numericDate(Date(timeIntervalSince1970: 1_300_819_380.75)) == .int(1_300_819_380))
    #expect(JSONValue.numericDate(Date(timeIntervalSince1970: -1.5)) == .int(-2))
    #expect(JSONValue.numericDate(Date(timeIntervalSince1970: 1e300)) == .double(1e300))
  }

  @Test func claimsSerializeCompactWithSortedKeys() {
    let claims: JWTClaims = ["sub": "a/b", "exp": 200, "aud": ["x", "y"], "f": 2.5]
    #expect(claims.json.serializedString == #"{"aud":["x","y"],"exp":200,"f":2.5,"sub":"a/b"}"#)
  }

  @Test func claimsAccessors() {
    var claims = JWTClaims(
      subject: "alice", issuer: "dialtone", audience: "livekit",
      issuedAt: Date(timeIntervalSince1970: 100), notBefore: Date(timeIntervalSince1970: 90),
      expiresAt: Date(timeIntervalSince1970: 200), extra: ["room": "r1", "n": 7, "f": 2.5, "admin": true])
    #expect(claims.subject == "alice")
    #expect(claims.issuer == "dialtone")
    #expect(claims.audience == ["livekit"])
    #expect(claims.issuedAt == Date(timeIntervalSince1970: 100))
    #expect(claims.notBefore == Date(timeIntervalSince1970: 90))
    #expect(claims.expiresAt == Date(timeIntervalSince1970: 200))
    #expect(claims["exp"] == .int(200))
    #expect(claims.string("room") == "r1")
    #expect(claims.int("n") == 7)
    #expect(claims.double("f") == 2.5)
    #expect(claims.bool("admin") == true)
    #expect(claims.string("n") == nil)
    #expect(claims.int("missing") == nil)
    claims.subject = nil
    #expect(claims.object["sub"] == nil)
    claims["aud"] = ["a", "b", 3]
    #expect(claims.audience == ["a", "b"])
    #expect(claims.json["room"] == "r1")
  }
}
