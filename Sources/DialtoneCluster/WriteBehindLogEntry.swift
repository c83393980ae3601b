/// One entry of a node's write-behind log (`WriteBehindLog`): the frames of one batch whose
/// sessions fall in one stripe, packed by the node into one argument, so that Redis stores a
/// batch with one call whatever it holds (docs/architecture.md, write-behind point 7). Redis
/// never reads inside it; a node that takes a session over decodes its holder's entries.
///
/// Layout (`WriteBehindLogWriter`'s varints and strings): version 1, frame count, then per
/// frame its session, epoch, seq, once-key, request id, letter position ('' for none) and bytes.
package struct WriteBehindLogEntry: Sendable, Equatable {
  package struct Frame: Sendable, Equatable {
    package let session: String
    package let epoch: UInt64
    package let seq: UInt64
    /// The relayed copy's once-key (`OnceKey`): the session's next holder refuses the copy again.
    package let once: String?
    /// The request it answers: the request repeated after a resume gets the same answer.
    package let requestID: String?
    /// The inbox position of the letter it came from: a resume applies the letters after the
    /// session's last one (`SessionLedger.resumeHolding`).
    package let letterPosition: String?
    package let bytes: [UInt8]

    package init(
      session: String, epoch: UInt64, seq: UInt64, bytes: [UInt8], once: String? = nil, requestID: String? = nil,
      letterPosition: String? = nil
    ) {
      self.session = session
      self.epoch = epoch
      self.seq = seq
      self.bytes = bytes
      self.once = once
      self.requestID = requestID
      self.letterPosition = letterPosition
    }
  }

  package var frames: [Frame]

  package init(frames: [Frame]) { self.frames = frames }

  static let version: UInt8 = 1
  /// The fewest bytes a frame takes: seven one-byte varints.
  private static let smallestFrame = 7

  package func encoded() -> [UInt8] {
    var writer = WriteBehindLogWriter()
    writer.byte(Self.version)
    writer.number(UInt64(frames.count))
    for frame in frames {
      writer.text(frame.session)
      writer.number(frame.epoch)
      writer.number(frame.seq)
      writer.text(frame.once ?? "")
      writer.text(frame.requestID ?? "")
      writer.text(frame.letterPosition ?? "")
      writer.data(frame.bytes)
    }
    return writer.bytes
  }

  package init(decoding bytes: [UInt8]) throws(WriteBehindLogMalformed) {
    var reader = WriteBehindLogReader(bytes)
    let version = try reader.byte()
    guard version == Self.version else { throw .unknownVersion(version) }
    let count = try reader.number()
    // A count the bytes cannot hold is a lie: refuse it before reserving for it.
    guard count <= UInt64(reader.remaining / Self.smallestFrame) else { throw .truncated }
    var frames: [Frame] = []
    frames.reserveCapacity(Int(count))
    for _ in 0..<count {
      let session = try reader.text()
      let epoch = try reader.number()
      let seq = try reader.number()
      let once = try reader.text()
      let request = try reader.text()
      let letter = try reader.text()
      frames.append(
        Frame(
          session: session, epoch: epoch, seq: seq, bytes: try reader.data(), once: once.isEmpty ? nil : once,
          requestID: request.isEmpty ? nil : request, letterPosition: letter.isEmpty ? nil : letter))
    }
    guard reader.isAtEnd else { throw .trailingBytes }
    self.frames = frames
  }
}
