import DialtoneJSON
import Foundation
import Testing

func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("JSON parser")
struct JSONParserTests {
  private func parse(_ text: String, maxDepth: Int = JSONValue.defaultMaxDepth) throws(JSONSyntaxError) -> JSONValue {
    try JSONValue.parse(utf8(text), maxDepth: maxDepth)
  }

  /// Strings are scanned eight bytes at a time, stepping straight to the first byte of a word
  /// that needs a look (a quote, a backslash, a control character, a non-ASCII byte): each such
  /// byte at every position of strings of every length across three words, with more text
  /// after the string, is found where it is.
  @Test func theByteThatEndsAPlainRunIsFoundAtEveryPosition() throws {
    for length in 0...24 {
      let plain = String(repeating: "a", count: length)
      // The closing quote after `length` plain bytes, and a document going on after it.
      #expect(try parse(#"["\#(plain)","\#(plain)b"]"#) == .array([.string(plain), .string(plain + "b")]))
      for position in 0..<length {
        let before = String(repeating: "a", count: position)
        let after = String(repeating: "z", count: length - position - 1)
        for byte in UInt8(0x20)..<0x80 where byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
          let text = before + String(UnicodeScalar(byte)) + after
          #expect(try parse(#"["\#(text)",1]"#) == .array([.string(text), .int(1)]), "\(byte) at \(position)")
        }
        for control in UInt8(0)..<0x20 {
          let document = Array(#"[""#.utf8) + Array(before.utf8) + [control] + Array(#"\#(after)",1]"#.utf8)
          #expect(throws: JSONSyntaxError(message: "unescaped control character in string", offset: 2 + position)) {
            try JSONValue.parse(document)
          }
        }
        #expect(try parse(#"["\#(before)\n\#(after)",1]"#) == .array([.string(before + "\n" + after), .int(1)]))
        #expect(try parse(#"["\#(before)\"\#(after)",1]"#) == .array([.string(before + "\"" + after), .int(1)]))
        #expect(try parse(#"["\#(before)é\#(after)",1]"#) == .array([.string(before + "é" + after), .int(1)]))
        // A quote ends the string where it is: what follows is not a value.
        #expect(throws: JSONSyntaxError.self) { try parse(#"["\#(before)"x\#(after)"]"#) }
        // Invalid UTF-8 is reported at its own offset.
        let invalid = Array(#"[""#.utf8) + Array(before.utf8) + [0xFF] + Array(#"\#(after)"]"#.utf8)
        #expect(throws: JSONSyntaxError(message: "invalid UTF-8 in string", offset: 2 + position)) {
          try JSONValue.parse(invalid)
        }
      }
    }
  }

  private static func parseOrNil(_ text: String) -> JSONValue? { JSONValue(parsing: utf8(text)) }

  @Test func scalars() throws {
    #expect(try parse("null") == .null)
    #expect(try parse("true") == .bool(true))
    #expect(try parse(" false ") == .bool(false))
    #expect(try parse("0") == .int(0))
    #expect(try parse("-0") == .int(0))
    #expect(try parse("42") == .int(42))
    #expect(try parse("-9223372036854775808") == .int(Int64.min))
    #expect(try parse("9223372036854775807") == .int(Int64.max))
    #expect(try parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
    #expect(try parse("-9223372036854775809") == .double(-9_223_372_036_854_775_808))  // nearest Double
    #expect(try parse("123456789012345678901234567890") == .double(Double("123456789012345678901234567890")!))
    #expect(try parse("1.5") == .double(1.5))
    #expect(try parse("-2.5e-3") == .double(-0.0025))
    #expect(try parse("1E2") == .double(100))
    #expect(try parse("1.0e-2") == .double(0.01))
    #expect(try parse("1e-400") == .double(0))
    #expect(try parse("1.0") == .double(1))
    #expect(try parse(#""a\/b""#) == .string("a/b"))
    #expect(try parse(#""\b\f\n\r\t\"\\""#) == .string("\u{08}\u{0C}\n\r\t\"\\"))
    #expect(try parse(#""\u00e9\u20AC\ud83d\ude00""#) == .string("é€😀"))
    #expect(try parse(#""\u0000""#) == .string("\u{0}"))
    #expect(try parse(#""""#) == .string(""))
    #expect(try parse(#""héllo 😀""#) == "héllo 😀")
  }

  @Test func containers() throws {
    #expect(try parse("[]") == .array([]))
    #expect(try parse("{}") == .object([:]))
    #expect(try parse(#"[1,"a",{"b":[null]}]"#) == [1, "a", ["b": [.null]]])
    #expect(try parse(" { \"a\" : [ 1 , 2 ] } ") == ["a": [1, 2]])
    #expect(
      try parse(" {\t\"a\" :\n[ 1 , -2.5e1, true,false , null, {}, [] ] }\r\n") == [
        "a": [1, -25.0, true, false, .null, [:], []]
      ])
  }

  @Test(arguments: [
    "", " ", "{", "}", "[1,]", #"{"a":1,}"#, "01", "-01", "1.", ".5", "+1", "1e", "1e+", "--1", "-", "NaN", "Infinity",
    "-Infinity", "1e400", "-1e400", "'a'", #"{'a':1}"#, "\"\u{01}\"", "\"a\nb\"", "\"tab\there\"", #""\ud800""#,
    #""\udc00""#, #""\ud800\u0041""#, #""\ud800\n""#, #""\udc00\ud800""#, #""\x41""#, #""\u12""#, #""\u12G4""#,
    #""\U0041""#, #"{"a":1,"a":2}"#, #"{"a":{"b":1,"b":1}}"#, "{} x", "{}{}", "[1] // c", "/* c */ 1", "tru",
    "nul", "True", "nulll", #"{"a" 1}"#, #"[{"a":1]"#, #"{"a":[1}"#, #"[[1}]"#, "{1:2}", #"{"a":}"#, "[1 2]",
    "\u{FEFF}{}", "\u{00A0}1", #""unterminated"#, #""\"#, "[", "[1", #"{"a""#, #"{"a":"#,
  ])
  func rejectsInvalidJSON(_ text: String) {
    #expect(throws: JSONSyntaxError.self) { try parse(text) }
    #expect(Self.parseOrNil(text) == nil)
  }

  @Test func rejectsInvalidUTF8() {
    let cases: [([UInt8], String)] = [
      ([0x22, 0xFF, 0x22], "invalid byte"),
      ([0x22, 0xC0, 0xAF, 0x22], "overlong"),
      ([0x22, 0xE0, 0x80, 0xAF, 0x22], "overlong three-byte"),
      ([0x22, 0xED, 0xA0, 0x80, 0x22], "encoded surrogate"),
      ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "beyond U+10FFFF"),
      ([0x22, 0xE2, 0x82, 0x22], "truncated sequence"),
      ([0x22, 0x80, 0x22], "lone continuation byte"),
      ([0x22, 0x5C, 0x6E, 0xFF, 0x22], "after an escape"),
      ([0x22, 0xC3, 0x5C, 0x6E, 0xA9, 0x22], "split by an escape"),
    ]
    for (bytes, label) in cases {
      #expect(JSONValue(parsing: bytes) == nil, "\(label)")
      #expect(throws: JSONSyntaxError.self, "\(label)") { try JSONValue.parse(bytes) }
    }
    #expect(JSONValue(parsing: [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x22]) == .string("😀"))
  }

  @Test func syntaxErrorsHaveOffsets() {
    #expect(throws: JSONSyntaxError(message: "unexpected end of input", offset: 0)) { try parse("") }
    #expect(throws: JSONSyntaxError(message: "unexpected end of input", offset: 2)) { try parse("  ") }
    #expect(throws: JSONSyntaxError(message: "unexpected data after the JSON value", offset: 3)) { try parse("{} x") }
    #expect(throws: JSONSyntaxError(message: "unterminated string", offset: 0)) { try parse(#""abc"#) }
    #expect(throws: JSONSyntaxError(message: "unexpected character ']'", offset: 3)) { try parse("[1,]") }
    #expect(throws: JSONSyntaxError(message: "leading zeros are not allowed", offset: 1)) { try parse("01") }
    #expect(throws: JSONSyntaxError(message: "unpaired surrogate escape", offset: 1)) { try parse(#""\ud800\u0041""#) }
    #expect(throws: JSONSyntaxError(message: "duplicate key \"a\"", offset: 7)) { try parse(#"{"a":1,"a":2}"#) }
    #expect(throws: JSONSyntaxError(message: "number out of range", offset: 1)) { try parse("[1e400]") }
    #expect(JSONSyntaxError(message: "bad", offset: 3).description == "bad at byte 3")
  }

  @Test func escapesMixedWithRawUTF8() throws {
    #expect(try parse(#""\n😀é\tü""#) == .string("\n😀é\tü"))
    // Invalid UTF-8 right after an escape is reported at its own offset.
    let after = utf8(#""\nA"#) + [0xC3, 0x28] + utf8("\"")
    #expect(throws: JSONSyntaxError(message: "invalid UTF-8 in string", offset: 4)) { try JSONValue.parse(after) }
    // ...and before an escape too.
    let before = utf8(#""A"#) + [0xE2, 0x28, 0xA1] + utf8(#"\n""#)
    #expect(throws: JSONSyntaxError(message: "invalid UTF-8 in string", offset: 2)) { try JSONValue.parse(before) }
  }

  @Test func nestingIsLimitedByDefault() {
    #expect(JSONValue.defaultMaxDepth == 64)
    let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
    #expect(Self.parseOrNil(ok) != nil)
    let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
    #expect(throws: JSONSyntaxError(message: "JSON nested deeper than 64 levels", offset: 64)) { try parse(deep) }
    // Far deeper input fails at the limit instead of exhausting the stack.
    #expect(Self.parseOrNil(String(repeating: #"{"a":"#, count: 100_000)) == nil)
    #expect(Self.parseOrNil(String(repeating: "[", count: 100_000)) == nil)
  }

  @Test func nestingLimitIsAParameter() throws {
    let nested = { (levels: Int) in
      String(repeating: #"{"a":["#, count: levels / 2) + "1" + String(repeating: "]}", count: levels / 2)
    }
    #expect(throws: Never.self) { try parse(nested(32), maxDepth: 32) }
    #expect(throws: JSONSyntaxError.self) { try parse(nested(34), maxDepth: 32) }
    #expect(throws: Never.self) { try parse(nested(34), maxDepth: 34) }
    #expect(throws: JSONSyntaxError(message: "JSON nested deeper than 0 levels", offset: 0)) {
      try parse("[]", maxDepth: 0)
    }
    #expect(try parse("7", maxDepth: 0) == 7)
    #expect(JSONValue(parsing: utf8("[[1]]"), maxDepth: 1) == nil)
    #expect(JSONValue(parsing: utf8("[[1]]"), maxDepth: 2) == [[1]])
  }

  @Test func acceptsAnyByteCollection() throws {
    let text = #"{"k":["v",1]}"#
    let expected: JSONValue = ["k": ["v", 1]]
    #expect(try JSONValue.parse(text.utf8) == expected)
    #expect(try JSONValue.parse(Data(text.utf8)) == expected)
    #expect(try JSONValue.parse(utf8("xx" + text + "yy").dropFirst(2).dropLast(2)) == expected)
    #expect(try JSONValue.parse(Data(("xx" + text).utf8).dropFirst(2)) == expected)
    // Not contiguous: parsed from a copy.
    #expect(try JSONValue.parse(text.utf8.lazy.map { $0 }) == expected)
    #expect(JSONValue(parsing: Data(text.utf8)) == expected)
  }

  @Test func parserAgreesWithFoundationOnStrings() throws {
    // Foundation-produced JSON (with escapes it chooses) parses to the same strings.
    let strings = ["plain", "tab\t", "uni é 😀", "slash /", "ctl \u{02}", "quote \"", "\u{2028}"]
    let data = try JSONSerialization.data(withJSONObject: strings)
    #expect(try JSONValue.parse(data) == .array(strings.map { .string($0) }))
  }

  @Test func parsesLargeDocumentsQuickly() throws {
    // A signaling frame at the size limit: one big SDP-like string with escapes.
    let line = "a=candidate:1 1 udp 2122260223 192.168.1.20 54321 typ host generation 0\\r\\n"
    let sdp = String(repeating: line, count: 400)
    let frame = utf8(#"{"type":"answer","id":"a","callId":"c1","sdp":"\#(sdp)"}"#)
    let clock = ContinuousClock()
    let elapsed = try clock.measure {
      for _ in 0..<50 {
        _ = try JSONValue.parse(frame)
      }
    }
    #expect(elapsed < .seconds(5))
  }
}
