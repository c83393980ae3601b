import DialtoneJSON
import Testing

@Suite("JSON tape")
struct JSONTapeTests {
  private func onTape<R>(_ text: String, _ body: (JSONTape) -> R) throws(JSONSyntaxError) -> R {
    try JSONTape.parse(Array(text.utf8), maxDepth: 32, syntaxError: unchanged) {
      (tape: JSONTape) throws(JSONSyntaxError) -> R in body(tape)
    }
  }

  @Test func membersAreFoundPastNestedValues() throws {
    let found = try onTape(#"{"a":{"x":[1,{"y":2}],"z":"s"},"b":[[],{}],"c":true}"#) { tape -> (Bool?, Int, Int) in
      let root = tape.root
      let c = tape.member(root, "c").flatMap { tape.bool($0) }
      let b = tape.member(root, "b").map { tape.count($0) } ?? -1
      let a = tape.member(root, "a").map { tape.count($0) } ?? -1
      return (c, b, a)
    }
    #expect(found.0 == true)
    #expect(found.1 == 2)
    #expect(found.2 == 2)
  }

  @Test func absentKeysAndOtherKindsAreNil() throws {
    let result = try onTape(#"{"type":"x","n":null}"#) { tape in
      (
        tape.member(tape.root, "typ") == nil, tape.member(tape.root, "types") == nil,
        tape.member(tape.root, "n").map { tape.isNull($0) }, tape.member(tape.member(tape.root, "type")!, "x") == nil
      )
    }
    #expect(result.0 && result.1 && result.2 == true && result.3)
  }

  @Test func escapedKeysAndStringsCompareByTheirDecodedText() throws {
    let result = try onTape(#"{"\u0074ype":"\u0069nvite","s":"a\"b\\c\n\ud83d\ude00"}"#) { tape in
      let type = tape.member(tape.root, "type")
      return (
        type.map { tape.string($0, equals: "invite") }, type.flatMap { tape.string($0) },
        tape.member(tape.root, "s").flatMap { tape.string($0) }
      )
    }
    #expect(result.0 == true)
    #expect(result.1 == "invite")
    #expect(result.2 == "a\"b\\c\n😀")
  }

  @Test func duplicateKeysAreRefusedHoweverTheyAreSpelled() throws {
    #expect(throws: JSONSyntaxError(message: #"duplicate key "a""#, offset: 7)) {
      try onTape(#"{"a":1,"\u0061":2}"#) { _ in () }
    }
    // Past the linear-scan size, keys go into a set; the duplicate is still found.
    let many = (0..<40).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
    #expect(throws: JSONSyntaxError.self) { try onTape("{\(many),\"k7\":0}") { _ in () } }
    #expect(try onTape("{\(many)}") { tape in tape.count(tape.root) } == 40)
    // Equal keys in different objects are fine.
    #expect(try onTape(#"{"a":{"a":{"a":1}}}"#) { _ in true })
  }

  @Test func numbersKeepTheirExactness() throws {
    let values = try onTape(#"[5, 5.0, 1e0, 2.5, -9223372036854775808, 9223372036854775808]"#) { tape in
      tape.elements(tape.root).map { (tape.integer($0), tape.double($0)) }
    }
    #expect(values.map(\.0) == [5, 5, 1, nil, Int64.min, nil])
    #expect(values.map(\.1) == [5, 5, 1, 2.5, -9_223_372_036_854_775_808, 9_223_372_036_854_775_808])
  }

  @Test func treeFromTheTapeEqualsTheParsedValue() throws {
    let text = #"{"a":[1,2.5,"x",null,true,{"b":{}}],"c":"\u00e9","d":-0}"#
    let fromTape = try onTape(text) { tape in tape.value(tape.root) }
    #expect(fromTape == (try JSONValue.parse(Array(text.utf8))))
    #expect(
      try onTape(text) { tape in tape.member(tape.root, "c").map { Array(tape.rawBytes($0)) } }
        == Array(#""\u00e9""#.utf8))
  }

  @Test func syntaxErrorsComeOutThroughTheCallersMapping() {
    struct Wrapped: Error, Equatable {
      let message: String
      init(_ error: JSONSyntaxError) { message = error.description }
      init(message: String) { self.message = message }
    }
    #expect(throws: Wrapped(message: "unexpected end of input at byte 5")) {
      try JSONTape.parse(Array(#"{"a":"#.utf8), maxDepth: 4, syntaxError: Wrapped.init) {
        (_: JSONTape) throws(Wrapped) in ()
      }
    }
  }

  /// Strings are scanned eight bytes at a time: a special byte anywhere in a word, on either
  /// side of a word boundary, must still be seen.
  @Test func specialBytesAreFoundAtEveryOffset() throws {
    for length in 1...24 {
      for offset in 0..<length {
        var plain = [UInt8](repeating: UInt8(ascii: "a"), count: length)
        plain[offset] = 0x01
        #expect(JSONValue(parsing: [0x22] + plain + [0x22]) == nil, "control byte at \(offset) of \(length)")
        plain[offset] = 0xFF
        #expect(JSONValue(parsing: [0x22] + plain + [0x22]) == nil, "invalid UTF-8 at \(offset) of \(length)")
        var text = String(repeating: "a", count: length)
        text.insert(contentsOf: "\\\"é", at: text.index(text.startIndex, offsetBy: offset))
        let expected = String(repeating: "a", count: offset) + "\"é" + String(repeating: "a", count: length - offset)
        #expect(try JSONValue.parse(Array("\"\(text)\"".utf8)) == .string(expected))
        let early = "\"" + String(repeating: "a", count: offset) + "\""
        #expect(
          try JSONValue.parse(Array((early + String(repeating: " ", count: length)).utf8))
            == .string(String(repeating: "a", count: offset)))
      }
    }
  }

  /// One scratch through documents of every size, in an order where a small one follows a large
  /// one, a malformed one and one too large for the room to be kept: every tape (or error) is
  /// the one a fresh parse gives.
  @Test func aReusedScratchParsesEachDocumentAsAFreshParseDoes() throws {
    let wide = "[" + (0..<300).map { #"{"k\#($0)":[\#($0),"s\#($0)"]}"# }.joined(separator: ",") + "]"
    let documents = [
      #"{"type":"candidate","id":"r1","callId":"c","candidate":{"candidate":"a","sdpMid":"0","sdpMLineIndex":0}}"#,
      #"[1,2,3]"#, wide, #""x""#, #"{"a":[1,2.5,"x",null,true,{"b":{}}],"c":"\u00e9","d":-0}"#, #"{"a":"#,
      #"{"a":1,"a":2}"#, "7", wide, #"{"deep":[[[[{"e":[]}]]]]}"#, "", "{}", #"["\ud83d\ude00",false]"#,
    ]
    var scratch = JSONTape.Scratch()
    for round in 0..<3 {
      for (index, text) in (round == 1 ? documents.reversed() : documents).enumerated() {
        let bytes = Array(text.utf8)
        let fresh = Result { () throws(JSONSyntaxError) in
          try JSONTape.parse(bytes, maxDepth: 32, syntaxError: unchanged) {
            (tape: JSONTape) throws(JSONSyntaxError) in tape.value(tape.root)
          }
        }
        let reused = Result { () throws(JSONSyntaxError) in
          try JSONTape.parse(bytes, maxDepth: 32, scratch: &scratch, syntaxError: unchanged) {
            (tape: JSONTape) throws(JSONSyntaxError) in tape.value(tape.root)
          }
        }
        #expect(fresh == reused, "document \(index) of round \(round)")
      }
    }
  }

  /// The parser writes tokens on the stack first (`JSONTape.stackTokens`) and moves them to
  /// memory of its own, doubling it, past that: documents just below, at and past each step keep
  /// every token and every container's extent, fresh or through one scratch.
  @Test func documentsPastTheParsersFirstRoomKeepEveryToken() throws {
    var scratch = JSONTape.Scratch()
    for count in [1, 22, 23, 24, 25, 26, 63, 64, 65, 127, 128, 129, 300, 1000, 2, 24] {
      // `count` tokens (7 at least): the array, `count - 7` numbers, then an object of 6 tokens.
      let numbers = (0..<max(count - 7, 0)).map { Int64($0) }
      let text = "[" + numbers.map { "\($0)," }.joined() + #"{"a":[7],"b":"s"}]"#
      let expected = JSONValue.array(
        numbers.map(JSONValue.int) + [.object(["a": .array([.int(7)]), "b": .string("s")])])
      let fresh = try JSONTape.parse(Array(text.utf8), maxDepth: 8, syntaxError: unchanged) {
        (tape: JSONTape) throws(JSONSyntaxError) in (tape.value(tape.root), tape.count(tape.root))
      }
      let reused = try JSONTape.parse(Array(text.utf8), maxDepth: 8, scratch: &scratch, syntaxError: unchanged) {
        (tape: JSONTape) throws(JSONSyntaxError) in (tape.value(tape.root), tape.count(tape.root))
      }
      #expect(fresh.0 == expected, "\(count) tokens")
      #expect(reused.0 == expected, "\(count) tokens, reused scratch")
      #expect(fresh.1 == numbers.count + 1 && reused.1 == numbers.count + 1)
    }
  }

  /// `member` reads a key's bytes once, by its pointer; a key given as a Unicode scalar literal
  /// has none, and is found by its text (plain and escaped members alike).
  @Test func aKeyWithoutBytesToPointAtIsFoundByItsText() throws {
    struct ScalarKey: ExpressibleByUnicodeScalarLiteral {
      let key: StaticString
      init(unicodeScalarLiteral value: StaticString) { key = value }
    }
    let a: ScalarKey = "a"
    let z: ScalarKey = "z"
    #expect(!a.key.hasPointerRepresentation)
    let found = try onTape(#"{"bb":1,"a":2,"\u007a":3}"#) { tape in
      (
        tape.member(tape.root, a.key).flatMap { tape.integer($0) },
        tape.member(tape.root, z.key).flatMap { tape.integer($0) }, tape.member(tape.root, "b") == nil,
        tape.member(tape.root, "").map { _ in true }
      )
    }
    #expect(found.0 == 2 && found.1 == 3 && found.2 && found.3 == nil)
    #expect(try onTape(#"{"x":0,"":1}"#) { tape in tape.member(tape.root, "").flatMap { tape.integer($0) } } == 1)
  }

  /// A repeated key past the parser's first room is found among the keys written before it grew.
  @Test func aRepeatedKeyIsFoundAcrossTheParsersGrowth() {
    for count in [20, 40, 70, 200] {
      let members = (0..<count).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
      let prefix = "{\(members),"
      #expect(throws: JSONSyntaxError(message: #"duplicate key "k3""#, offset: prefix.utf8.count), "\(count) keys") {
        try onTape(prefix + #""k3":0}"#) { _ in () }
      }
    }
  }
}

private func unchanged(_ error: JSONSyntaxError) -> JSONSyntaxError { error }

struct JSONTapeStringBytesTests {
  private static func identity(_ error: JSONSyntaxError) -> JSONSyntaxError { error }

  /// Each member's string bytes (`withStringBytes`), nil for a value that is not a string.
  private func bytes(of keys: [StaticString], in text: String) throws(JSONSyntaxError) -> [[UInt8]?] {
    try JSONTape.parse(Array(text.utf8), maxDepth: 8, syntaxError: Self.identity) {
      (tape: JSONTape) throws(JSONSyntaxError) -> [[UInt8]?] in
      keys.map { key in tape.member(tape.root, key).flatMap { tape.withStringBytes($0) { Array($0) } } }
    }
  }

  @Test func aStringsBytesAreItsTextWhetherEscapedOrNot() throws {
    let text = #"{"plain":"candidate","escaped":"c\u0061n\"d\\","number":1,"empty":"","wide":"h\u00e9"}"#
    let read = try bytes(of: ["plain", "escaped", "number", "empty", "wide"], in: text)
    #expect(read[0] == Array("candidate".utf8))
    #expect(read[1] == Array("can\"d\\".utf8))
    #expect(read[2] == nil)
    #expect(read[3] == [])
    #expect(read[4] == Array("hé".utf8))
  }
}

/// `withUnescapedStringBytes`: a string's bytes in place when they are its text, else nil.
struct JSONTapeUnescapedBytesTests {
  private static func identity(_ error: JSONSyntaxError) -> JSONSyntaxError { error }

  @Test func onlyAStringWithoutEscapesIsLentInPlace() throws {
    let text = #"{"plain":"candidate","wide":"hé","empty":"","escaped":"a\u0000b","slash":"a\/b","number":1}"#
    let keys: [StaticString] = ["plain", "wide", "empty", "escaped", "slash", "number"]
    let read = try JSONTape.parse(Array(text.utf8), maxDepth: 8, syntaxError: Self.identity) {
      (tape: JSONTape) throws(JSONSyntaxError) -> [[UInt8]?] in
      keys.map { key in tape.member(tape.root, key).flatMap { tape.withUnescapedStringBytes($0) { Array($0) } } }
    }
    #expect(read == [Array("candidate".utf8), Array("hé".utf8), [], nil, nil, nil])
  }

  /// Why a reader may skip the NUL scan of a string lent in place: the parser refuses every
  /// byte below 0x20 raw, at any place in a string, so only an escape makes one.
  @Test func noRawByteBelow0x20GetsOntoTheTape() {
    for byte in UInt8(0)..<0x20 {
      for position in [0, 3, 11] {
        var text = Array(#"{"s":"0123456789abcdef"}"#.utf8)
        text[6 + position] = byte
        #expect(throws: JSONSyntaxError.self, "byte \(byte) at \(position)") {
          try JSONTape.parse(text, maxDepth: 8, syntaxError: Self.identity) { (_: JSONTape) throws(JSONSyntaxError) in
            ()
          }
        }
      }
    }
  }
}
