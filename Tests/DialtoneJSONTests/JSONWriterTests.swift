import DialtoneJSON
import Foundation
import Testing

@Suite("JSON writer")
struct JSONWriterTests {
  @Test func writerIsCompactSortedAndRoundTrips() throws {
    let value: JSONValue = ["b": [1, 2.5, true, .null], "a": "x\u{1F}y", "Z": [:], "é": -7]
    let text = value.serializedString
    #expect(text == #"{"Z":{},"a":"x\u001fy","b":[1,2.5,true,null],"é":-7}"#)
    #expect(value.serialized == utf8(text))
    #expect(try JSONValue.parse(value.serialized) == value)
  }

  @Test func keysSortByteWiseAndSlashesAreNotEscaped() {
    let value: JSONValue = ["b": 1, "a": "x/y", "c": [true, .null, 2.5], "B": 0, "aa": [], "ä": 0]
    #expect(value.serializedString == #"{"B":0,"a":"x/y","aa":[],"b":1,"c":[true,null,2.5],"ä":0}"#)
  }

  @Test(arguments: [3, 32, 33, 500]) func objectsOfEverySizeComeOutSorted(_ size: Int) throws {
    // Small objects and large ones take different sorting paths in the writer.
    let keys = (0..<size).map { "k\(String($0 * 7919 % 1000, radix: 16))-\($0)" }
    let value = JSONValue.object(
      Dictionary(uniqueKeysWithValues: keys.map { ($0, JSONValue.int(Int64($0.utf8.count))) }))
    let expected =
      "{"
      + keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { "\"\($0)\":\($0.utf8.count)" }
      .joined(separator: ",") + "}"
    #expect(value.serializedString == expected)
  }

  @Test func numbers() throws {
    #expect(JSONValue.int(0).serializedString == "0")
    #expect(JSONValue.int(-7).serializedString == "-7")
    #expect(JSONValue.int(Int64.max).serializedString == "9223372036854775807")
    #expect(JSONValue.int(Int64.min).serializedString == "-9223372036854775808")
    #expect(JSONValue.double(1.25).serializedString == "1.25")
    #expect(JSONValue.double(1e20).serializedString == "1e+20")
    #expect(JSONValue.double(.leastNonzeroMagnitude).serializedString == "5e-324")
    for number in [1e20, Double.leastNonzeroMagnitude, 0.1, -2.5e-3, 1.7976931348623157e308] {
      #expect(try JSONValue.parse(JSONValue.double(number).serialized) == .double(number))
    }
  }

  @Test func nonFiniteNumbersBecomeNullAndAreDetectable() {
    #expect(JSONValue.double(.infinity).serializedString == "null")
    #expect(JSONValue.double(-.infinity).serializedString == "null")
    #expect(JSONValue.double(.nan).serializedString == "null")
    #expect(JSONValue.double(.nan).containsNonFiniteNumber)
    #expect((["a": [1, ["b": .double(-.infinity)]]] as JSONValue).containsNonFiniteNumber)
    #expect(!(["a": [1, 2.5, "inf", .null, ["b": false]]] as JSONValue).containsNonFiniteNumber)
  }

  @Test func writerOutputIsAcceptedByFoundation() throws {
    let value: JSONValue = ["s": "quote\" back\\ ctl\u{01} nl\n 😀", "n": [0, -1, 1.25], "o": ["k": false]]
    let object = try JSONSerialization.jsonObject(with: Data(value.serialized))
    let dictionary = object as? [String: Any]
    #expect(dictionary?["s"] as? String == "quote\" back\\ ctl\u{01} nl\n 😀")
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

  @Test func agreesWithParserOnOrdinaryDocuments() {
    let value: JSONValue = [
      "sub": "a", "exp": 1_700_000_000, "f": 0.5, "ok": true, "list": [1, "x", .null], "o": ["k": "v"],
    ]
    #expect(JSONValue(parsing: value.serialized) == value)
  }
}
