import Testing

@testable import DialtoneNet

/// The server's frame reader on exact bytes, without sockets.
struct WebSocketFrameParserTests {
  private static let key: [UInt8] = [0x37, 0xfa, 0x21, 0x3d]

  /// A client frame: masked unless `masked` is false, with any header bits a test wants wrong.
  static func frame(
    _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, masked: Bool = true, length: Int? = nil
  ) -> [UInt8] {
    var bytes: [UInt8] = [(fin ? 0x80 : 0) | rsv | opcode]
    let count = length ?? payload.count
    let maskBit: UInt8 = masked ? 0x80 : 0
    if count < 126 {
      bytes.append(maskBit | UInt8(count))
    } else if count <= 0xFFFF {
      bytes += [maskBit | 126, UInt8(count >> 8), UInt8(count & 0xff)]
    } else {
      bytes.append(maskBit | 127)
      for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8((UInt64(count) >> UInt64(shift)) & 0xff)) }
    }
    if masked {
      bytes += key
      bytes += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    } else {
      bytes += payload
    }
    return bytes
  }

  /// Every event `input` yields, fed in pieces of `chunk` bytes.
  static func events(_ input: [UInt8], chunk: Int = .max, limit: Int = 1 << 16) -> [WebSocketFrameParser.Event] {
    var parser = WebSocketFrameParser(maxMessageBytes: limit)
    var events: [WebSocketFrameParser.Event] = []
    var start = 0
    while start < input.count {
      let piece = Array(input[start..<min(input.count, start + chunk)])
      start += piece.count
      piece.withUnsafeBytes { buffer in
        var index = 0
        while let event = parser.next(buffer, &index) { events.append(event) }
      }
    }
    return events
  }

  private static func failure(_ code: UInt16, in events: [WebSocketFrameParser.Event]) -> Bool {
    if case .failure(let got, _) = events.last { return got == code }
    return false
  }

  @Test(arguments: [1, 2, 3, 7, .max])
  func messagesSurviveAnySplit(chunk: Int) {
    let big = [UInt8](repeating: 0x61, count: 70_000)
    let input =
      Self.frame(0x1, Array("héllo".utf8)) + Self.frame(0x2, [0, 1, 2, 255])
      + Self.frame(0x1, Array("frag".utf8), fin: false) + Self.frame(0x9, Array("p".utf8))
      + Self.frame(0x0, Array("ment".utf8)) + Self.frame(0xA, []) + Self.frame(0x2, big)
      + Self.frame(0x8, [0x03, 0xe8] + Array("bye".utf8)) + Self.frame(0x1, Array("after close".utf8))
    #expect(
      Self.events(input, chunk: chunk, limit: 100_000) == [
        .message(Array("héllo".utf8), isText: true), .message([0, 1, 2, 255], isText: false),
        .ping(Array("p".utf8)), .message(Array("fragment".utf8), isText: true), .pong,
        .message(big, isText: false), .close(code: 1000, reason: Array("bye".utf8)),
      ])
  }

  /// The loop's shared room: messages delivered in it are the bytes sent, whatever the
  /// receiver kept of the earlier ones (kept ones are never overwritten), and the room's
  /// storage carries over from message to message (its capacity, set once here: a message in
  /// an array of its own would have about its own size).
  @Test(arguments: [3, .max])
  func aSharedRoomNeverChangesAKeptMessage(chunk: Int) {
    let payloads = (0..<40).map { n in Array("message \(n) \(String(repeating: "x", count: n * 7))".utf8) }
    var input: [UInt8] = []
    for (n, payload) in payloads.enumerated() { input += Self.frame(n % 5 == 4 ? 0x2 : 0x1, payload) }
    var parser = WebSocketFrameParser(maxMessageBytes: 1 << 16)
    var room: [UInt8] = []
    room.reserveCapacity(4096)
    var kept: [(Int, [UInt8])] = []
    var delivered = 0
    var start = 0
    while start < input.count {
      let piece = Array(input[start..<min(input.count, start + chunk)])
      start += piece.count
      piece.withUnsafeBytes { buffer in
        var index = 0
        while let event = parser.next(buffer, &index, room: &room) {
          guard case .message(let bytes, let isText) = event else {
            Issue.record("unexpected \(event)")
            continue
          }
          #expect(bytes == payloads[delivered])
          #expect(isText == (delivered % 5 != 4))
          // Whole reads come through the room; pieces are reassembled elsewhere.
          if chunk == .max { #expect(bytes.capacity >= 4096, "message \(delivered)") }
          // Every third message is kept by the receiver, as a parked request would keep it.
          if delivered % 3 == 0 { kept.append((delivered, bytes)) }
          delivered += 1
        }
      }
    }
    #expect(delivered == payloads.count)
    for (n, bytes) in kept { #expect(bytes == payloads[n]) }
  }

  @Test func anUnmaskedFrameFails() {
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x1, Array("hi".utf8), masked: false))))
  }

  @Test(arguments: [0x10, 0x20, 0x40] as [UInt8])
  func reservedBitsFail(rsv: UInt8) {
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x1, [0x61], rsv: rsv))))
  }

  @Test(arguments: [0x3, 0x4, 0x5, 0x6, 0x7, 0xB, 0xC, 0xD, 0xE, 0xF] as [UInt8])
  func reservedOpcodesFail(opcode: UInt8) {
    #expect(Self.failure(1002, in: Self.events(Self.frame(opcode, []))))
  }

  @Test func controlFramesOver125BytesOrFragmentedFail() {
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x9, [UInt8](repeating: 1, count: 126)))))
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x9, [1], fin: false))))
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x8, [], fin: false))))
  }

  @Test func fragmentationRulesAreEnforced() {
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x0, [0x61]))))
    let nested = Self.frame(0x1, [0x61], fin: false) + Self.frame(0x2, [0x62])
    #expect(Self.failure(1002, in: Self.events(nested)))
  }

  /// Invalid UTF-8 fails at its first byte: here the message never ends, and the frame is still
  /// incomplete when the bad byte arrives.
  @Test func invalidUTF8FailsAtTheFirstBadByte() {
    let start = Self.frame(0x1, Array("valid".utf8), fin: false)
    var second = Self.frame(0x0, [0xF8, 0x88, 0x80, 0x80, 0x80] + Array("never sent".utf8), fin: false)
    second.removeLast(8)  // the rest of the frame has not arrived
    #expect(Self.failure(1007, in: Self.events(start + second)))
    #expect(Self.failure(1007, in: Self.events(Self.frame(0x1, Array("cut".utf8) + [0xCE]))))
    #expect(Self.failure(1007, in: Self.events(Self.frame(0x1, [0xED, 0xA0, 0x80]))))  // a surrogate
    #expect(Self.failure(1007, in: Self.events(Self.frame(0x1, [0xC0, 0xAF]))))  // overlong
  }

  @Test func aCharacterSplitAcrossFragmentsIsValid() {
    let bytes = Array("µ@ßö".utf8)
    let input = Self.frame(0x1, Array(bytes.prefix(1)), fin: false) + Self.frame(0x0, Array(bytes.dropFirst()))
    #expect(Self.events(input) == [.message(bytes, isText: true)])
  }

  /// Over the limit fails at the frame header, before any of the payload is read or delivered.
  @Test func aMessageOverTheLimitFailsWith1009() {
    let header = Array(Self.frame(0x2, [], length: 2048).prefix(8))
    #expect(Self.failure(1009, in: Self.events(header, limit: 1024)))
    let fragments =
      Self.frame(0x2, [UInt8](repeating: 0, count: 600), fin: false)
      + Self.frame(0x0, [UInt8](repeating: 0, count: 600))
    #expect(Self.failure(1009, in: Self.events(fragments, limit: 1024)))
    #expect(Self.events(Self.frame(0x2, [UInt8](repeating: 0, count: 1024)), limit: 1024).count == 1)
  }

  @Test func aLengthWithItsTopBitSetFails() {
    let header: [UInt8] = [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1] + Self.key
    #expect(Self.failure(1002, in: Self.events(header)))
  }

  @Test func closePayloadsAreChecked() {
    #expect(Self.events(Self.frame(0x8, [])) == [.close(code: nil, reason: [])])
    #expect(Self.failure(1002, in: Self.events(Self.frame(0x8, [0x03]))))
    for code: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] {
      #expect(Self.failure(1002, in: Self.events(Self.frame(0x8, [UInt8(code >> 8), UInt8(code & 0xff)]))), "\(code)")
    }
    for code: UInt16 in [1000, 1001, 1003, 1007, 1011, 1012, 1014, 3000, 4999] {
      #expect(Self.events(Self.frame(0x8, [UInt8(code >> 8), UInt8(code & 0xff)])) == [.close(code: code, reason: [])])
    }
    #expect(Self.failure(1007, in: Self.events(Self.frame(0x8, [0x03, 0xe8, 0xce, 0xba, 0xff]))))
  }

  /// After this side's close, data frames are skipped unread; the peer's close is still found.
  @Test func afterDiscardDataOnlyTheCloseFrameCounts() {
    var parser = WebSocketFrameParser(maxMessageBytes: 16)
    parser.discardData()
    let input =
      Self.frame(0x1, [UInt8](repeating: 0xFF, count: 100)) + Self.frame(0x0, [1]) + Self.frame(0x8, [0x03, 0xe8])
    var events: [WebSocketFrameParser.Event] = []
    input.withUnsafeBytes { buffer in
      var index = 0
      while let event = parser.next(buffer, &index) { events.append(event) }
    }
    #expect(events == [.close(code: 1000, reason: [])])
  }
}

struct UTF8ValidatorTests {
  @Test func acceptsTextInAnyPieces() {
    let text = Array("ASCII, κόσμε, 日本語, 🎉 and more ASCII to pass eight at a time".utf8)
    for size in 1...9 {
      var validator = UTF8Validator()
      var start = 0
      while start < text.count {
        let valid = validator.consume(Array(text[start..<min(text.count, start + size)]))
        #expect(valid)
        start += size
      }
      #expect(validator.isComplete)
    }
  }

  @Test(
    arguments: [
      [0x80], [0xC1, 0x80], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF],
    ] as [[UInt8]])
  func refusesInvalidSequences(bytes: [UInt8]) {
    var validator = UTF8Validator()
    let valid = validator.consume(Array("ok".utf8) + bytes + Array("ok".utf8))
    #expect(!valid)
  }

  @Test func aCharacterCutShortIsIncomplete() {
    var validator = UTF8Validator()
    let valid = validator.consume([0xE6, 0x97])
    #expect(valid)
    #expect(!validator.isComplete)
  }
}
