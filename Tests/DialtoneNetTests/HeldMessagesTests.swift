import Testing

@testable import DialtoneNet

/// Held messages framed in place (`frame(into:)`, the usual way out) and into an array of their
/// own (`framed`, for the queue) give the bytes `WebSocketFrame.append` gives, one frame after
/// another, for payloads across the three header lengths, text and binary.
struct HeldMessagesTests {
  @Test func bothWaysOutAreTheFramesInOrder() {
    let sizes = [0, 1, 125, 126, 300, 65_535, 65_536, 70_000]
    var held = HeldMessages()
    var expected: [UInt8] = []
    for (n, size) in sizes.enumerated() {
      let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) }
      held.append(payload, binary: n % 3 == 1)
      WebSocketFrame.append(payload, binary: n % 3 == 1, to: &expected)
      #expect(held.framedBytes == expected.count)
      #expect(held.framed() == expected)
      var inPlace = [UInt8](repeating: 0xEE, count: held.framedBytes + 16)
      let written = inPlace.withUnsafeMutableBytes { held.frame(into: $0.baseAddress!) }
      #expect(written == expected.count)
      #expect(Array(inPlace[..<written]) == expected)
    }
    #expect(HeldMessages().isEmpty && !held.isEmpty)
  }

  /// Every socket carries one, holding or not: it stays one word, as the array it replaced.
  @Test func itIsOneWord() {
    #expect(MemoryLayout<HeldMessages>.size == MemoryLayout<[UInt8]>.size)
  }

  /// A text message held alone, then one more of each kind: framed in order either way.
  @Test func aSecondMessageJoinsTheFirstInOrder() {
    for second in [false, true] {
      var held = HeldMessages()
      var expected: [UInt8] = []
      held.append(Array("first".utf8), binary: false)
      WebSocketFrame.append(Array("first".utf8), binary: false, to: &expected)
      held.append([1, 2, 3], binary: second)
      WebSocketFrame.append([1, 2, 3], binary: second, to: &expected)
      held.append(Array("third".utf8), binary: false)
      WebSocketFrame.append(Array("third".utf8), binary: false, to: &expected)
      #expect(held.framed() == expected && held.framedBytes == expected.count)
    }
  }
}
