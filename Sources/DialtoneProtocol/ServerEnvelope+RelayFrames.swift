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
    var out = JSONWriter(capacity: 64 + ack.replyTo.utf8.count + (ack.callId?.utf8.count ?? 0))
    out.append("{")
    if let callId = ack.callId {
      out.append("\"callId\":")
      out.writeString(callId)
      out.append(",")
    }
    out.append("\"replyTo\":")
    out.writeString(ack.replyTo)
    writeEnvelope(seq: seq, type: "ack", to: &out)
    return out.bytes
  }

  /// `{"callId":…,"candidate":{…},"from":{…},"leg":true,"seq":N,"type":"candidate"}`, the
  /// optional members only when present (`leg` only when true).
  private static func candidateBytes(_ message: ServerMessage.Candidate, seq: UInt64?) -> [UInt8] {
    let ice = message.candidate
    let from = message.from
    var textBytes = message.callId.utf8.count + ice.candidate.utf8.count + from.userId.utf8.count
    textBytes += from.deviceId.utf8.count + (ice.sdpMid?.utf8.count ?? 0) + (ice.usernameFragment?.utf8.count ?? 0)
    textBytes += from.name?.utf8.count ?? 0
    // Every key, quote and punctuation mark is under 200 bytes; escapes, if any, grow it.
    var out = JSONWriter(capacity: 200 + textBytes)
    out.append("{\"callId\":")
    out.writeString(message.callId)
    out.append(",\"candidate\":{\"candidate\":")
    out.writeString(ice.candidate)
    if let index = ice.sdpMLineIndex {
      out.append(",\"sdpMLineIndex\":")
      out.writeInteger(Int64(index))
    }
    if let mid = ice.sdpMid {
      out.append(",\"sdpMid\":")
      out.writeString(mid)
    }
    if let fragment = ice.usernameFragment {
      out.append(",\"usernameFragment\":")
      out.writeString(fragment)
    }
    out.append("},\"from\":{\"deviceId\":")
    out.writeString(from.deviceId)
    if let name = from.name {
      out.append(",\"name\":")
      out.writeString(name)
    }
    out.append(",\"userId\":")
    out.writeString(from.userId)
    out.append("}")
    if message.leg { out.append(",\"leg\":true") }
    writeEnvelope(seq: seq, type: "candidate", to: &out)
    return out.bytes
  }

  /// `,"seq":N,"type":"…"}`: the envelope's members, after every field of these two frames.
  private static func writeEnvelope(seq: UInt64?, type: StaticString, to out: inout JSONWriter) {
    if let seq {
      out.append(",\"seq\":")
      out.writeInteger(Int64(clamping: seq))
    }
    out.append(",\"type\":\"")
    out.append(type)
    out.append("\"}")
  }
}
