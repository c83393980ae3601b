import DialtoneJSON

/// The two frames most of a call's traffic is — a relayed `candidate` and a plain `ack` (a
/// request's id and at most its call id) — written field by field in their wire order, without
/// the generic `WireEncoder` (its visitor, the per-key envelope merge, a copy of each nested
/// value) and into a buffer sized for them (the generic one starts at 512 bytes whatever the
/// frame). The bytes are exactly `WireEncoder`'s: keys in byte-wise order, the envelope's `seq`
/// and `type` last (both sort after every field of these two), strings escaped by the same
/// `JSONWriter`. `ServerEnvelopeRelayFramesTests` holds the two to the same bytes.
extension ServerEnvelope {
  /// The frame's bytes, when it is one of the two; nil for any other message.
  var relayFrameBytes: [UInt8]? { Self.relayFrameBytes(of: message, seq: seq) }

  /// `relayFrameBytes` of the envelope `message` and `seq` would make.
  static func relayFrameBytes(of message: ServerMessage, seq: UInt64?) -> [UInt8]? {
    switch message {
    case .ack(let ack) where ack.call == nil && ack.group == nil:
      return ackBytes(ack, seq: seq)
    case .candidate(let candidate):
      return candidateBytes(candidate, seq: seq)
    default:
      return nil
    }
  }

  /// `{"callId":…,"replyTo":…,"seq":N,"type":"ack"}`, callId and seq when present.
  private static func ackBytes(_ ack: ServerMessage.Ack, seq: UInt64?) -> [UInt8] {
    // Punctuation, keys and the seq's digits fit in 64; escapes, if any, grow it.
    let capacity = 64 + ack.replyTo.utf8.count + (ack.callId?.utf8.count ?? 0)
    return frameBytes(capacity: capacity) { (out: inout OnePassFrame) in
      write(ack, seq: seq, to: &out)
    } orElse: {
      (out: inout JSONWriter) in
      write(ack, seq: seq, to: &out)
    }
  }

  private static func write(_ ack: ServerMessage.Ack, seq: UInt64?, to out: inout some RelayFrameSink) {
    out.raw("{")
    if let callId = ack.callId {
      out.raw("\"callId\":")
      out.string(callId)
      out.raw(",")
    }
    out.raw("\"replyTo\":")
    out.string(ack.replyTo)
    writeEnvelope(seq: seq, type: "ack", to: &out)
  }

  /// `{"callId":…,"candidate":{…},"from":{…},"leg":true,"seq":N,"type":"candidate"}`, the
  /// optional members only when present (`leg` only when true).
  private static func candidateBytes(_ message: ServerMessage.Candidate, seq: UInt64?) -> [UInt8] {
    let ice = message.candidate
    let from = message.from
    var textBytes = message.callId.utf8.count + ice.candidate.utf8.count + from.userId.utf8.count
    textBytes += from.deviceId.utf8.count + (ice.sdpMid?.utf8.count ?? 0) + (ice.usernameFragment?.utf8.count ?? 0)
    textBytes += from.name?.utf8.count ?? 0
    // Keys, quotes, punctuation and digits take under 200 bytes unless the line index and the seq
    // both have near 20 digits (up to about 216); such a frame, or one with an escape, is written
    // again by `JSONWriter`, which grows.
    return frameBytes(capacity: 200 + textBytes) { (out: inout OnePassFrame) in
      write(message, seq: seq, to: &out)
    } orElse: {
      (out: inout JSONWriter) in
      write(message, seq: seq, to: &out)
    }
  }

  private static func write(_ message: ServerMessage.Candidate, seq: UInt64?, to out: inout some RelayFrameSink) {
    let ice = message.candidate
    let from = message.from
    out.raw("{\"callId\":")
    out.string(message.callId)
    out.raw(",\"candidate\":{\"candidate\":")
    out.string(ice.candidate)
    if let index = ice.sdpMLineIndex {
      out.raw(",\"sdpMLineIndex\":")
      out.integer(Int64(index))
    }
    if let mid = ice.sdpMid {
      out.raw(",\"sdpMid\":")
      out.string(mid)
    }
    if let fragment = ice.usernameFragment {
      out.raw(",\"usernameFragment\":")
      out.string(fragment)
    }
    out.raw("},\"from\":{\"deviceId\":")
    out.string(from.deviceId)
    if let name = from.name {
      out.raw(",\"name\":")
      out.string(name)
    }
    out.raw(",\"userId\":")
    out.string(from.userId)
    out.raw("}")
    if message.leg { out.raw(",\"leg\":true") }
    writeEnvelope(seq: seq, type: "candidate", to: &out)
  }

  /// `,"seq":N,"type":"…"}`: the envelope's members, after every field of these two frames.
  private static func writeEnvelope(seq: UInt64?, type: StaticString, to out: inout some RelayFrameSink) {
    if let seq {
      out.raw(",\"seq\":")
      out.integer(Int64(clamping: seq))
    }
    out.raw(",\"type\":\"")
    out.raw(type)
    out.raw("\"}")
  }

  /// A frame written in one pass into `capacity` bytes of scratch (what the strings take
  /// unescaped plus room for the rest), then copied once into an array of its own size: a few
  /// copies where `JSONWriter`'s appends each checked the array's uniqueness and room. A string
  /// that needs an escape (clients' candidates almost never do) or a frame past `capacity` is
  /// written again by `JSONWriter` (`orElse`, the same pieces).
  ///
  /// Scratch and a copy, not `[UInt8](unsafeUninitializedCapacity:)`: that initialiser reaches
  /// the standard library's unspecialised allocation, which looks the array storage's type up at
  /// run time on every call (~600 instructions a frame); `Array(UnsafeBufferPointer)` allocates
  /// through the specialised path, and the copy of a few hundred bytes costs far less.
  private static func frameBytes(
    capacity: Int, _ write: (inout OnePassFrame) -> Void, orElse writeEscaped: (inout JSONWriter) -> Void
  ) -> [UInt8] {
    let written: [UInt8]? = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { scratch in
      guard let base = scratch.baseAddress else { return nil }
      var cursor = OnePassFrame(at: base, end: base + scratch.count)
      write(&cursor)
      guard let end = cursor.position else { return nil }
      return Array(UnsafeBufferPointer(start: base, count: end - base))
    }
    if let written { return written }
    var out = JSONWriter(capacity: capacity)
    writeEscaped(&out)
    return out.bytes
  }
}

/// Where a relay frame's pieces go: `JSONWriter` (any string) or `OnePassFrame`.
protocol RelayFrameSink {
  mutating func raw(_ text: StaticString)
  mutating func string(_ text: String)
  mutating func integer(_ number: Int64)
}

extension JSONWriter: RelayFrameSink {
  mutating func raw(_ text: StaticString) { append(text) }
  mutating func string(_ text: String) { writeString(text) }
  mutating func integer(_ number: Int64) { writeInteger(number) }
}

/// A frame's pieces copied straight into reserved memory; `position` turns nil, and nothing more
/// is written, at the first string that needs an escape or piece that does not fit.
struct OnePassFrame: RelayFrameSink {
  private(set) var position: UnsafeMutablePointer<UInt8>?
  private let end: UnsafeMutablePointer<UInt8>

  init(at start: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>) {
    position = start
    self.end = end
  }

  mutating func raw(_ text: StaticString) {
    guard let at = position else { return }
    let count = text.utf8CodeUnitCount
    guard end - at >= count else {
      position = nil
      return
    }
    at.update(from: text.utf8Start, count: count)
    position = at + count
  }

  mutating func string(_ text: String) {
    guard let at = position else { return }
    position = JSONWriter.writePlainQuoted(text, at: at, end: end)
  }

  mutating func integer(_ number: Int64) {
    // 20 digits and a sign at most.
    guard var at = position, end - at >= 21 else {
      position = nil
      return
    }
    if number < 0 {
      at.pointee = UInt8(ascii: "-")
      at += 1
    }
    var magnitude = number.magnitude
    var digits = 1
    while magnitude >= 10 {
      magnitude /= 10
      digits += 1
    }
    magnitude = number.magnitude
    var slot = at + digits
    repeat {
      slot -= 1
      slot.pointee = UInt8(ascii: "0") + UInt8(magnitude % 10)
      magnitude /= 10
    } while magnitude > 0
    position = at + digits
  }
}
