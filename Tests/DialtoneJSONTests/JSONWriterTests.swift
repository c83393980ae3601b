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

  /// `writeString` tests eight bytes at a time for a byte to escape: every byte below 0x80, and
  /// a non-ASCII character, at every position of strings of every length across two words (and
  /// runs of them) come out as a byte at a time writes them (`escapedModel`).
  @Test func stringsAreEscapedAsAByteAtATimeEscapesThem() {
    let specials: [UInt8] = Array(0..<0x20) + [0x22, 0x5C]
    var cases: [[UInt8]] = [[], Array("é".utf8), Array("🎧 ünï".utf8)]
    for length in 1...19 {
      for position in 0..<length {
        for byte in UInt8(0)..<0x80 {
          var text = Array(repeating: UInt8(ascii: "a"), count: length)
          text[position] = byte
          cases.append(text)
        }
        var accented = Array(repeating: UInt8(ascii: "x"), count: length)
        accented.replaceSubrange(position..<position + 1, with: Array("é".utf8))
        cases.append(accented)
      }
    }
    for start in 0..<9 {
      // Runs of escapes, back to back and one apart, after plain and non-ASCII bytes.
      cases.append(Array(repeating: UInt8(ascii: "q"), count: start) + specials + Array("ÿ".utf8) + specials)
      cases.append(Array(repeating: UInt8(ascii: "q"), count: start) + specials.flatMap { [$0, UInt8(ascii: "z")] })
    }
    for bytes in cases {
      let text = String(decoding: bytes, as: UTF8.self)
      var writer = JSONWriter()
      writer.writeString(text)
      #expect(writer.bytes == Self.escapedModel(text), "\(Array(text.utf8))")
    }
  }

  /// RFC 8259 escaping a byte at a time: `"`, `\\` and the control characters, `\u00XX` for the
  /// ones without a short form; every other byte as it is.
  private static func escapedModel(_ text: String) -> [UInt8] {
    var out: [UInt8] = [UInt8(ascii: "\"")]
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "\""): out += Array(#"\""#.utf8)
      case UInt8(ascii: "\\"): out += Array(#"\\"#.utf8)
      case 0x0A: out += Array(#"\n"#.utf8)
      case 0x0D: out += Array(#"\r"#.utf8)
      case 0x09: out += Array(#"\t"#.utf8)
      case 0x08: out += Array(#"\b"#.utf8)
      case 0x0C: out += Array(#"\f"#.utf8)
      case 0..<0x20: out += Array(String(format: "\\u%04x", Int(byte)).utf8)
      default: out.append(byte)
      }
    }
    out.append(UInt8(ascii: "\""))
    return out
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
  /// `writePlainQuoted`: `writeString`'s bytes for every text that needs no escape (every length
  /// around a word, every byte below 0x80 and bytes above it at every place); nil for one that
  /// needs an escape anywhere, or when the room is one byte short.
  @Test func plainQuotedIsWriteStringsBytesOrNil() {
    var texts = ["", "a", "héllo wörld 日本 🎧"]
    for length in 1...19 {
      for place in 0..<length {
        for byte in Array(0..<0x80) + [0xC3] {
          var bytes = Array(repeating: UInt8(ascii: "x"), count: length)
          bytes[place] = byte == 0xC3 ? 0xC3 : UInt8(byte)
          if byte == 0xC3 { bytes.insert(0xA9, at: place + 1) }
          texts.append(String(decoding: bytes, as: UTF8.self))
        }
      }
    }
    var plain = 0
    for text in texts {
      var writer = JSONWriter()
      writer.writeString(text)
      let escaped = writer.bytes.count != text.utf8.count + 2
      withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.utf8.count + 2) { room in
        guard let start = room.baseAddress else { return }
        let end = JSONWriter.writePlainQuoted(text, at: start, end: start + room.count)
        if escaped {
          #expect(end == nil, "\(Array(text.utf8))")
        } else {
          #expect(end == start + room.count)
          #expect(Array(room) == writer.bytes, "\(Array(text.utf8))")
          #expect(JSONWriter.writePlainQuoted(text, at: start, end: start + room.count - 1) == nil)
          plain += 1
        }
      }
    }
    #expect(plain > 19 * 10 * 90)
  }
}
