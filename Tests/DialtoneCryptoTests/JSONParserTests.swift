import DialtoneCrypto
import Testing

@Suite struct JSONParserTests {
  static func parse(_ text: String) -> JSONValue? { JSONValue(parsing: utf8(text)) }

  @Test func acceptsValidJSON() {
    #expect(Self.parse(" {\t\"a\" :\n[ 1 , -2.5e1, true,false , null, {}, [] ] }\r\n") ==
      ["a": [1, -25.0, true, false, .null, [:], []]])
    #expect(Self.parse(#""\u00e9\ud83d\ude00\n\"\\\/\b\f\r\t\u0000""#) == .string("é😀\n\"\\/\u{8}\u{c}\r\t\u{0}"))
    #expect(Self.parse(#""héllo 😀""#) == "héllo 😀")
    #expect(Self.parse("0") == .int(0))
    #expect(Self.parse("-0") == .int(0))
    #expect(Self.parse("9223372036854775807") == .int(Int.max))
    #expect(Self.parse("-9223372036854775808") == .int(Int.min))
    #expect(Self.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
    #expect(Self.parse("1E2") == .double(100))
    #expect(Self.parse("1.0e-2") == .double(0.01))
    #expect(Self.parse("1e-400") == .double(0))
    let nested = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
    #expect(Self.parse(nested) != nil)
  }

  @Test(arguments: [
    "", " ", "{", "}", "[1,]", #"{"a":1,}"#, "01", "1.", ".5", "+1", "1e", "1e+", "--1", "-", "NaN", "Infinity",
    "1e400", "-1e400", "'a'", #"{'a':1}"#, "\"\u{01}\"", "\"a\nb\"", #""\ud800""#, #""\udc00""#,
    #""\ud800\u0041""#, #""\x41""#, #""\u12""#, #""\u12G4""#, #"{"a":1,"a":2}"#, "{} x", "{}{}", "[1] // c",
    "tru", "nul", "True", #"{"a" 1}"#, #"[{"a":1]"#, #"{"a":[1}"#, #"[[1}]"#, "{1:2}", #"{"a":}"#, "[1 2]",
    "\u{FEFF}{}", #""unterminated"#,
  ])
  func rejectsInvalidJSON(_ text: String) {
    #expect(Self.parse(text) == nil)
  }

  @Test func rejectsInvalidUTF8() {
    #expect(JSONValue(parsing: [0x22, 0xFF, 0x22]) == nil)
    #expect(JSONValue(parsing: [0x22, 0xC0, 0xAF, 0x22]) == nil, "overlong")
    #expect(JSONValue(parsing: [0x22, 0xED, 0xA0, 0x80, 0x22]) == nil, "encoded surrogate")
    #expect(JSONValue(parsing: [0x22, 0xE2, 0x82, 0x22]) == nil, "truncated sequence")
    #expect(JSONValue(parsing: [0x22, 0x5C, 0x6E, 0xFF, 0x22]) == nil, "after an escape")
  }

  @Test func rejectsExcessiveNesting() {
    let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
    #expect(Self.parse(deep) == nil)
    let deepObjects = String(repeating: #"{"a":"#, count: 100_000)
    #expect(Self.parse(deepObjects) == nil)
  }

  @Test func agreesWithCodableOnOrdinaryDocuments() throws {
    let value: JSONValue = [
      "sub": "a", "exp": 1_700_000_000, "f": 0.5, "ok": true, "list": [1, "x", .null], "o": ["k": "v"],
    ]
    #expect(JSONValue(parsing: try value.serialized()) == value)
  }
}
