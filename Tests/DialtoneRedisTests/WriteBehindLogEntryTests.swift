import DialtoneCluster
import Testing

/// The node log's values as pure bytes: what a node packs it reads back, and what it did not
/// pack is an error.
@Suite struct WriteBehindLogEntryTests {
  typealias Frame = WriteBehindLogEntry.Frame

  private let sample = WriteBehindLogEntry(frames: [
    Frame(session: "s_a", epoch: 1, seq: 1, bytes: Array(#"{"seq":1}"#.utf8), once: "c1:2", letterPosition: "17-0"),
    Frame(session: "s_b", epoch: UInt64.max, seq: 300, bytes: [], requestID: "m-é"),
    Frame(session: "s_a", epoch: 2, seq: 128, bytes: [0, 255, 10]),
  ])

  @Test func anEntryReadsBackAsItWasPacked() throws {
    #expect(try WriteBehindLogEntry(decoding: sample.encoded()) == sample)
    #expect(try WriteBehindLogEntry(decoding: WriteBehindLogEntry(frames: []).encoded()).frames.isEmpty)
  }

  @Test func everyCutShortEntryIsRefusedAsTruncated() {
    let bytes = sample.encoded()
    for length in 1..<bytes.count {
      #expect(throws: WriteBehindLogMalformed.self) { try WriteBehindLogEntry(decoding: Array(bytes.prefix(length))) }
    }
    #expect(throws: WriteBehindLogMalformed.truncated) { try WriteBehindLogEntry(decoding: []) }
  }

  @Test func otherMalformedEntriesAreRefusedWithTheirReason() {
    var bytes = sample.encoded()
    #expect(throws: WriteBehindLogMalformed.trailingBytes) { try WriteBehindLogEntry(decoding: bytes + [0]) }
    bytes[0] = 2
    #expect(throws: WriteBehindLogMalformed.unknownVersion(2)) { try WriteBehindLogEntry(decoding: bytes) }
    // A frame count the bytes cannot hold, before anything is reserved for it.
    #expect(throws: WriteBehindLogMalformed.truncated) {
      try WriteBehindLogEntry(decoding: [1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0])
    }
    // A varint past 64 bits.
    #expect(throws: WriteBehindLogMalformed.numberTooLarge) {
      try WriteBehindLogEntry(decoding: [1] + Array(repeating: 0xff, count: 10) + [1])
    }
    #expect(throws: WriteBehindLogMalformed.numberTooLarge) {
      try WriteBehindLogEntry(decoding: [1] + Array(repeating: 0x80, count: 9) + [2])
    }
    // A session that is not UTF-8.
    #expect(throws: WriteBehindLogMalformed.notText) {
      try WriteBehindLogEntry(decoding: [1, 1, 1, 0xff, 1, 1, 0, 0, 0, 0])
    }
  }

  @Test func aCheckpointIsLastAndAnOptionalLetterPosition() throws {
    let both = WriteBehindLogTrimmed.Checkpoint(last: 12, letterPosition: "170-3")
    #expect(both.text == "12 170-3")
    #expect(try WriteBehindLogTrimmed.Checkpoint(text: both.text) == both)
    #expect(try WriteBehindLogTrimmed.Checkpoint(text: "7") == .init(last: 7, letterPosition: nil))
    for bad in ["", "x", "-1", "7 ", "7 a b", " 7"] {
      #expect(throws: WriteBehindLogMalformed.badCheckpoint(bad)) { try WriteBehindLogTrimmed.Checkpoint(text: bad) }
    }
  }

  @Test func aTrimsOnceKeysReadBackAndACutShortBlobIsRefused() throws {
    let onces = WriteBehindLogTrimmed.Onces([.init(session: "s_a", once: "c1"), .init(session: "s_b", once: "c2")])
    #expect(try WriteBehindLogTrimmed.Onces(decoding: onces.encoded()) == onces)
    #expect(throws: WriteBehindLogMalformed.truncated) {
      try WriteBehindLogTrimmed.Onces(decoding: Array(onces.encoded().dropLast()))
    }
  }

  @Test func aTakenSessionKeepsTheLaterEpochsFrameForASeqAndTheNewestState() throws {
    let old = Frame(session: "s_a", epoch: 1, seq: 5, bytes: [1], once: "o-old", letterPosition: "9-0")
    let newer = Frame(session: "s_a", epoch: 3, seq: 5, bytes: [2], requestID: "m1", letterPosition: "9-4")
    let next = Frame(session: "s_a", epoch: 3, seq: 6, bytes: [3])
    let other = Frame(session: "s_b", epoch: 1, seq: 9, bytes: [4], letterPosition: "9-5")
    let entries = [
      WriteBehindLogEntry(frames: [old, other]).encoded(), WriteBehindLogEntry(frames: [newer, next]).encoded(),
    ]
    let taken = try WriteBehindLogTaken(
      session: "s_a", checkpoint: "4 8-0",
      onceBlobs: [WriteBehindLogTrimmed.Onces([.init(session: "s_a", once: "o4")]).encoded()], entries: entries)
    #expect(taken.frames == [newer, next])
    #expect(taken.last == 6 && taken.letterPosition == "9-4" && taken.replies == ["m1": [2]])
    #expect(taken.onces == ["o4", "o-old"])
    // A checkpoint past the frames (they were re-stored elsewhere, then trimmed) still counts.
    let trimmed = try WriteBehindLogTaken(session: "s_a", checkpoint: "40", onceBlobs: [], entries: entries)
    #expect(trimmed.last == 40)
    #expect(throws: WriteBehindLogMalformed.trailingBytes) {
      try WriteBehindLogTaken(session: "s_a", checkpoint: "", onceBlobs: [], entries: [entries[0] + [7]])
    }
  }
}
