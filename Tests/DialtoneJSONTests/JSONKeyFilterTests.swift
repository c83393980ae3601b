import Testing

@testable import DialtoneJSON

/// The parser's duplicate-key check clears a key whose filter bit (`JSONTape.keyBit`) its object
/// has not set yet without comparing it: these hold it to refusing every duplicate the full
/// comparison refused, and to telling apart keys that share a bit.
@Suite("JSON key filter")
struct JSONKeyFilterTests {
  private static func identity(_ error: JSONSyntaxError) -> JSONSyntaxError { error }

  /// The object's member count, or the syntax error.
  private func parse(_ text: String) -> Result<Int, JSONSyntaxError> {
    Result { () throws(JSONSyntaxError) -> Int in
      try JSONTape.parse(Array(text.utf8), maxDepth: 8, syntaxError: Self.identity) {
        (tape: JSONTape) throws(JSONSyntaxError) -> Int in tape.count(tape.root)
      }
    }
  }

  private func bit(_ key: String) -> UInt64 {
    JSONParser.keyBit(count: key.utf8.count, first: key.utf8.first ?? UInt8(ascii: "\""))
  }

  @Test func aKeyGetsExactlyOneBit() {
    for length in 0..<200 {
      #expect(bit(String(repeating: "x", count: length)).nonzeroBitCount == 1, "length \(length)")
    }
    #expect(bit("é").nonzeroBitCount == 1)
  }

  /// The keys of the frames a call is made of (relayed or not) each get a bit of their own in
  /// their object: none of them is compared with its neighbours.
  @Test func aSignalingFramesKeysShareNoBit() {
    let objects: [[String]] = [
      ["type", "id", "callId", "candidate", "toDevice"], ["candidate", "sdpMid", "sdpMLineIndex", "usernameFragment"],
      ["type", "seq"], ["type", "id", "callId", "to", "video", "offer"], ["type", "id", "callId", "answer"],
      ["type", "id", "version", "token"],
    ]
    for keys in objects {
      #expect(Set(keys.map(bit)).count == keys.count, "\(keys)")
    }
  }

  @Test func keysSharingABitAreToldApart() throws {
    let keys = (0..<200).map { "k\($0)" }
    var pair: (String, String)?
    search: for (offset, first) in keys.enumerated() {
      for second in keys[(offset + 1)...] where bit(first) == bit(second) {
        pair = (first, second)
        break search
      }
    }
    let (a, b) = try #require(pair)
    #expect(try parse(#"{"\#(a)":1,"\#(b)":2}"#).get() == 2)
    let prefix = #"{"\#(a)":1,"\#(b)":2,"#
    #expect(throws: JSONSyntaxError(message: "duplicate key \"\(b)\"", offset: prefix.utf8.count)) {
      try parse(prefix + #""\#(b)":3}"#).get()
    }
  }

  /// Every earlier key repeated, in objects below, at and past the 16 keys where the check turns
  /// to a set: refused at the repeat, whether spelled plainly or with an escape.
  @Test func aRepeatOfAnyEarlierKeyIsRefused() {
    for count in 1...20 {
      let members = (0..<count).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
      #expect((try? parse("{\(members)}").get()) == count, "\(count) keys")
      for earlier in 0..<count {
        for spelling in ["k\(earlier)", #"\u006b\#(earlier)"#, #"k\#(earlier)"#.replacingLastCharacterWithEscape()] {
          let prefix = "{\(members),"
          let offset = prefix.utf8.count
          #expect(
            throws: JSONSyntaxError(message: "duplicate key \"k\(earlier)\"", offset: offset),
            "\(count) keys, k\(earlier) as \(spelling)"
          ) { try parse(prefix + #""\#(spelling)":0}"#).get() }
        }
      }
    }
  }

  @Test func emptyAndEscapedKeysRepeatLikeAnyOther() throws {
    #expect(throws: JSONSyntaxError(message: #"duplicate key """#, offset: 6)) { try parse(#"{"":1,"":2}"#).get() }
    #expect(throws: JSONSyntaxError(message: #"duplicate key "type""#, offset: 10)) {
      try parse(#"{"type":1,"\u0074yp\u0065":2}"#).get()
    }
    #expect(throws: JSONSyntaxError(message: #"duplicate key "a\b""#, offset: 10)) {
      try parse(#"{"a\\b":1,"a\u005cb":2}"#).get()
    }
    #expect(try parse(#"{"type":1,"typ":2,"ype":3,"tyqe":4}"#).get() == 4)
  }
}

extension String {
  /// The string with its last character (ASCII) written as a `\u00XX` escape.
  fileprivate func replacingLastCharacterWithEscape() -> String {
    guard let last = unicodeScalars.last, last.isASCII else { return self }
    let hex = String(last.value, radix: 16)
    return String(dropLast()) + "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
  }
}
