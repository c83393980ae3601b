/// What a node that takes a session over (`WriteBehindLog.take`) learns of it from its previous
/// holder's stripe, rebuilt from the entries, the session's checkpoint and the trimmed once-keys
/// (docs/architecture.md, write-behind point 7): a pure value, so that the rules are tested
/// without Redis.
package struct WriteBehindLogTaken: Sendable, Equatable {
  /// The session's frames the stripe still holds, in seq order, one per seq: where the holder
  /// stored a seq twice (under an epoch it lost, then under a later one), the later epoch's.
  package var frames: [WriteBehindLogEntry.Frame]
  /// The last seq the previous holder stored (its frames or its checkpoint), nil for none.
  package var last: UInt64?
  /// The inbox position of the last letter the previous holder stored for the session.
  package var letterPosition: String?
  /// Once-keys of the relayed copies it stored, oldest first.
  package var onces: [String]
  /// The answers to the requests whose answer frames the stripe still holds.
  package var replies: [String: [UInt8]]

  /// Rebuilt for `session` from a take's reply: the checkpoint text ('' none), the once-key
  /// blobs and the entries, oldest first.
  package init(
    session: String, checkpoint: String, onceBlobs: [[UInt8]], entries: [[UInt8]]
  ) throws(WriteBehindLogMalformed) {
    let saved = checkpoint.isEmpty ? nil : try WriteBehindLogTrimmed.Checkpoint(text: checkpoint)
    last = saved?.last
    letterPosition = saved?.letterPosition
    onces = []
    for blob in onceBlobs {
      for pair in try WriteBehindLogTrimmed.Onces(decoding: blob).pairs where pair.session == session {
        onces.append(pair.once)
      }
    }
    var bySeq: [UInt64: WriteBehindLogEntry.Frame] = [:]
    replies = [:]
    for bytes in entries {
      for frame in try WriteBehindLogEntry(decoding: bytes).frames where frame.session == session {
        if let kept = bySeq[frame.seq], kept.epoch > frame.epoch { continue }
        bySeq[frame.seq] = frame
        if let position = frame.letterPosition { letterPosition = position }
        if let once = frame.once { onces.append(once) }
        if let request = frame.requestID { replies[request] = frame.bytes }
      }
    }
    frames = bySeq.values.sorted { $0.seq < $1.seq }
    if let newest = frames.last?.seq { last = max(last ?? 0, newest) }
  }
}
