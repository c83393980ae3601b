import DialtoneCrypto
import Foundation
import Testing

@Suite struct JSONValueTests {
  @Test func parsesEachKindDistinctly() throws {
    let value = try #require(
      JSONValue(parsing: utf8(#"{"t":true,"i":1,"d":1.5,"s":"x","n":null,"a":[1,"y"],"o":{"k":false}}"#)))
    #expect(value["t"] == .bool(true))
    #expect(value["i"] == .int(1))
    #expect(value["d"] == .double(1.5))
    #expect(value["s"] == .string("x"))
    #expect(value["n"] == .null)
    #expect(value["a"] == [1, "y"])
    #expect(value["o"] == ["k": false])
    #expect(value["t"]?.intValue == nil)
    #expect(value["i"]?.boolValue == nil)
  }

  @Test func serializesCompactWithSortedKeys() throws {
    let value: JSONValue = ["b": 1, "a": "x/y", "c": [true, .null, 2.5]]
    #expect(String(decoding: try value.serialized(), as: UTF8.self) == #"{"a":"x/y","b":1,"c":[true,null,2.5]}"#)
  }

  @Test func nonFiniteNumbersDoNotSerialize() {
    #expect(throws: (any Error).self) { try JSONValue.double(.infinity).serialized() }
  }

  @Test func numericDates() {
    #expect(JSONValue.numericDate(Date(timeIntervalSince1970: 1_300_819_380.75)) == .int(1_300_819_380))
    #expect(JSONValue.double(5.0).intValue == 5)
    #expect(JSONValue.double(5.5).intValue == nil)
    #expect(JSONValue.double(1e300).intValue == nil)
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
