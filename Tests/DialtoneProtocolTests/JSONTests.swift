import DialtoneProtocol
import Foundation
import Testing

@Suite("JSON parser and writer")
struct JSONTests {
  private func parse(_ text: String) throws -> JSONValue {
    try JSONValue.parse(Array(text.utf8))
  }

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
    #expect(try parse("1.5") == .double(1.5))
    #expect(try parse("-2.5e-3") == .double(-0.0025))
    #expect(try parse("1E2") == .double(100))
    #expect(try parse(#""a\/b""#) == .string("a/b"))
    #expect(try parse(#""\b\f\n\r\t\"\\""#) == .string("\u{08}\u{0C}\n\r\t\"\\"))
    #expect(try parse(#""\u00e9\u20AC\ud83d\ude00""#) == .string("é€😀"))
    #expect(try parse(#""""#) == .string(""))
  }

  @Test func containers() throws {
    #expect(try parse("[]") == .array([]))
    #expect(try parse("{}") == .object([:]))
    #expect(try parse(#"[1,"a",{"b":[null]}]"#) == [1, "a", ["b": [nil]]])
    #expect(try parse(" { \"a\" : [ 1 , 2 ] } ") == ["a": [1, 2]])
  }

  @Test func integerValue() {
    #expect(JSONValue.double(3.0).integerValue == 3)
    #expect(JSONValue.double(3.5).integerValue == nil)
    #expect(JSONValue.double(1e300).integerValue == nil)
    #expect(JSONValue.string("3").integerValue == nil)
    #expect(JSONValue.bool(true).integerValue == nil)
  }

  @Test func writerIsCompactSortedAndRoundTrips() throws {
    let value: JSONValue = ["b": [1, 2.5, true, nil], "a": "x\u{1F}y", "Z": [:], "é": -7]
    let text = value.serializedString
    #expect(text == #"{"Z":{},"a":"x\u001fy","b":[1,2.5,true,null],"é":-7}"#)
    #expect(try parse(text) == value)
    #expect(JSONValue.double(.infinity).serializedString == "null")
    #expect(JSONValue.double(1e20).serializedString == "1e+20")
    #expect(try parse(JSONValue.double(1e20).serializedString) == .double(1e20))
  }

  @Test func writerOutputIsAcceptedByFoundation() throws {
    let value: JSONValue = ["s": "quote\" back\\ ctl\u{01} nl\n 😀", "n": [0, -1, 1.25], "o": ["k": false]]
    let object = try JSONSerialization.jsonObject(with: Data(value.serialized))
    let dictionary = object as? [String: Any]
    #expect(dictionary?["s"] as? String == "quote\" back\\ ctl\u{01} nl\n 😀")
  }

  @Test func parserAgreesWithFoundationOnStrings() throws {
    // Foundation-produced JSON (with escapes it chooses) parses to the same strings.
    let strings = ["plain", "tab\t", "uni é 😀", "slash /", "ctl \u{02}", "quote \"", "\u{2028}"]
    let data = try JSONSerialization.data(withJSONObject: strings)
    #expect(try JSONValue.parse(data) == .array(strings.map { .string($0) }))
  }

  @Test func syntaxErrorsHaveOffsets() {
    #expect(throws: JSONSyntaxError(message: "unexpected end of input", offset: 0)) { try parse("") }
    #expect(throws: JSONSyntaxError(message: "unexpected end of input", offset: 2)) { try parse("  ") }
    #expect(throws: JSONSyntaxError(message: "unexpected data after the JSON value", offset: 3)) { try parse("{} x") }
    #expect(throws: JSONSyntaxError(message: "unterminated string", offset: 0)) { try parse(#""abc"#) }
    #expect(throws: JSONSyntaxError(message: "unexpected character ']'", offset: 3)) { try parse("[1,]") }
    #expect(throws: JSONSyntaxError(message: "leading zeros are not allowed", offset: 1)) { try parse("01") }
    #expect(throws: JSONSyntaxError(message: "unpaired surrogate escape", offset: 1)) { try parse(#""\ud800\u0041""#) }
  }

  @Test func trickyStringsRoundTrip() throws {
    var strings = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }
    strings += [
      "", "\"", "\\", "\\\"", "a\"b\\c", "é", "😀", "\u{2028}\u{2029}", "\u{0}", "\u{7F}", "mixed \r\n é \t 😀 \"q\"",
      String(repeating: "v=0\r\n", count: 500), "\u{FFFF}\u{10FFFF}",
    ]
    for string in strings {
      let encoded = JSONValue.string(string).serialized
      #expect(try JSONValue.parse(encoded) == .string(string), "\(Array(string.utf8))")
      #expect(!encoded.dropFirst().dropLast().contains(where: { $0 < 0x20 }))
    }
  }

  @Test func escapesMixedWithRawUTF8() throws {
    #expect(try parse(#""\n😀é\tü""#) == .string("\n😀é\tü"))
    // Invalid UTF-8 right after an escape is reported at its own offset.
    let after = Array(#""\nA"#.utf8) + [0xC3, 0x28] + Array("\"".utf8)
    #expect(throws: JSONSyntaxError(message: "invalid UTF-8 in string", offset: 4)) { try JSONValue.parse(after) }
    // ...and before an escape too.
    let before = Array(#""A"#.utf8) + [0xE2, 0x28, 0xA1] + Array(#"\n""#.utf8)
    #expect(throws: JSONSyntaxError(message: "invalid UTF-8 in string", offset: 2)) { try JSONValue.parse(before) }
  }

  @Test func parsesLargeDocumentsQuickly() throws {
    // A frame at the size limit: one big SDP-like string with escapes.
    let line = "a=candidate:1 1 udp 2122260223 192.168.1.20 54321 typ host generation 0\\r\\n"
    let sdp = String(repeating: line, count: 400)
    let frame = #"{"type":"answer","id":"a","callId":"c1","sdp":"\#(sdp)"}"#
    let clock = ContinuousClock()
    let elapsed = try clock.measure {
      for _ in 0..<50 {
        _ = try JSONValue.parse(Array(frame.utf8))
      }
    }
    #expect(elapsed < .seconds(5))
  }
}
