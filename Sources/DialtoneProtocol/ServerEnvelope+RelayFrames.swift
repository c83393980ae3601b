import DialtoneJSON

/// The two frames most of a call's traffic is — a relayed `candidate` and a plain `ack` (a
/// request's id and at most its call id) — written field by field in their wire order, without
/// the generic `WireEncoder` (its visitor, the per-key envelope merge, a copy of each nested
/// value) and into an array of exactly their size, counted first (the generic one starts at 512
/// bytes whatever the frame). The bytes are exactly `WireEncoder`'s: keys in byte-wise order, the envelope's `seq`
/// and `type` last (both sort after every field of these two), strings escaped by the same
/// `JSONWriter`. `ServerEnvelopeRelayFramesTests` holds the two to the same bytes.
extension ServerEnvelope {
  /// The frame's bytes, when it is one of the two; nil for any other message.
  var relayFrameBytes: [UInt8]? {
    switch message {
    case .ack(let ack) where ack.call == nil && ack.group == nil:
      return Self.ackBytes(ack, seq: seq)
    case .candidate(let candidate):
      return Self.candidateBytes(candidate, seq: seq)
    default:
      return nil
    }
  }

  /// `{"callId":…,"replyTo":…,"seq":N,"type":"ack"}`, callId and seq when present.
  private static func ackBytes(_ ack: ServerMessage.Ack, seq: UInt64?) -> [UInt8] {
    var counting = CountingSink()
    writeAck(ack, seq: seq, to: &counting)
    return frame(of: counting.count) { writeAck(ack, seq: seq, to: &$0) }
  }

  private static func writeAck(_ ack: ServerMessage.Ack, seq: UInt64?, to out: inout some FrameSink) {
    out.raw("{")
    if let callId = ack.callId {
      out.raw("\"callId\":")
      out.quoted(callId)
      out.raw(",")
    }
    out.raw("\"replyTo\":")
    out.quoted(ack.replyTo)
    writeEnvelope(seq: seq, type: "ack", to: &out)
  }

  /// `{"callId":…,"candidate":{…},"from":{…},"leg":true,"seq":N,"type":"candidate"}`, the
  /// optional members only when present (`leg` only when true).
  private static func candidateBytes(_ message: ServerMessage.Candidate, seq: UInt64?) -> [UInt8] {
    var counting = CountingSink()
    writeCandidate(message, seq: seq, to: &counting)
    return frame(of: counting.count) { writeCandidate(message, seq: seq, to: &$0) }
  }

  private static func writeCandidate(_ message: ServerMessage.Candidate, seq: UInt64?, to out: inout some FrameSink) {
    let ice = message.candidate
    let from = message.from
    out.raw("{\"callId\":")
    out.quoted(message.callId)
    out.raw(",\"candidate\":{\"candidate\":")
    out.quoted(ice.candidate)
    if let index = ice.sdpMLineIndex {
      out.raw(",\"sdpMLineIndex\":")
      out.integer(Int64(index))
    }
    if let mid = ice.sdpMid {
      out.raw(",\"sdpMid\":")
      out.quoted(mid)
    }
    if let fragment = ice.usernameFragment {
      out.raw(",\"usernameFragment\":")
      out.quoted(fragment)
    }
    out.raw("},\"from\":{\"deviceId\":")
    out.quoted(from.deviceId)
    if let name = from.name {
      out.raw(",\"name\":")
      out.quoted(name)
    }
    out.raw(",\"userId\":")
    out.quoted(from.userId)
    out.raw("}")
    if message.leg { out.raw(",\"leg\":true") }
    writeEnvelope(seq: seq, type: "candidate", to: &out)
  }

  /// `,"seq":N,"type":"…"}`: the envelope's members, after every field of these two frames.
  private static func writeEnvelope(seq: UInt64?, type: StaticString, to out: inout some FrameSink) {
    if let seq {
      out.raw(",\"seq\":")
      out.integer(Int64(clamping: seq))
    }
    out.raw(",\"type\":\"")
    out.raw(type)
    out.raw("\"}")
  }

  /// A frame of `count` bytes (what `CountingSink` counted for the same pieces) in an array of
  /// exactly that size, written into its memory: no growth, no per-append uniqueness and
  /// capacity checks, no spare room kept in the session's queue of unacknowledged frames.
  private static func frame(of count: Int, _ write: (inout WritingSink) -> Void) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, written in
      guard let start = buffer.baseAddress else { return }
      var writing = WritingSink(at: start)
      write(&writing)
      written = writing.at - start
    }
  }
}

/// Where a relay frame's pieces go: counted (`CountingSink`), then written (`WritingSink`), with
/// `JSONWriter`'s escapes and digits.
private protocol FrameSink {
  /// Bytes as they are: punctuation and keys.
  mutating func raw(_ text: StaticString)
  /// A string, quoted and escaped.
  mutating func quoted(_ text: String)
  mutating func integer(_ number: Int64)
}

private struct CountingSink: FrameSink {
  var count = 0

  // `withUTF8Buffer`, not `utf8Start`: a one-character literal ("{") is a StaticString without
  // a pointer representation.
  mutating func raw(_ text: StaticString) { count += text.withUTF8Buffer { $0.count } }

  mutating func quoted(_ text: String) {
    var text = text
    count += text.withUTF8 { JSONWriter.quotedByteCount($0) }
  }

  mutating func integer(_ number: Int64) { count += JSONWriter.integerByteCount(number) }
}

/// Writes into memory `CountingSink` sized: never past it, as both see the same pieces.
private struct WritingSink: FrameSink {
  var at: UnsafeMutablePointer<UInt8>

  mutating func raw(_ text: StaticString) {
    let start = at
    at = text.withUTF8Buffer { bytes in
      guard let base = bytes.baseAddress else { return start }
      start.initialize(from: base, count: bytes.count)
      return start + bytes.count
    }
  }

  mutating func quoted(_ text: String) {
    var text = text
    let start = at
    at = text.withUTF8 { JSONWriter.writeQuoted($0, at: start) }
  }

  mutating func integer(_ number: Int64) { at = JSONWriter.writeInteger(number, at: at) }
}
