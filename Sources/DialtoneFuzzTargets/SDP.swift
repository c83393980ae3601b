import DialtoneClient
import DialtoneProtocol

extension FuzzTargets {
  /// SDP from a peer: the SDK splits it into media sections, reads payload types and directions,
  /// and embeds trickled candidates into it. The input is SDP, then optionally a NUL and a
  /// candidate message as it arrives from the server.
  public static func sdp(_ data: UnsafePointer<UInt8>, _ size: Int) {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let split = bytes.firstIndex(of: 0) ?? bytes.count
    let sdp = String(decoding: bytes[..<split], as: UTF8.self)
    for section in SDPMediaSection.sections(of: sdp) {
      _ = section.payloadType(of: "opus/48000")
      _ = section.payloadType(of: "vp8/90000")
    }
    _ = MediaDirection.video(in: sdp)
    var candidates: [IceCandidate] = []
    if split < bytes.count,
      let envelope = try? MessageCodec.decodeServerMessage(bytes[(split + 1)...], options: .strict),
      case .candidate(let message) = envelope.message
    {
      candidates.append(message.candidate)
    }
    _ = SDPCandidates.embedding(candidates, in: sdp)
    return
  }
}
