import DialtoneBenchSlices
import DialtoneCommandLine
import DialtoneJSON
import DialtoneProtocol
import Foundation

/// `dialtone-bench codec`: the signaling codec against Foundation's `JSONDecoder` /
/// `JSONEncoder` on the messages the relay handles most (a trickled candidate in, the relayed
/// candidate out) and the largest one (an invite with a 1.4 KB offer). Also the strict parser
/// alone, to show what the intermediate `JSONValue` tree costs. Each figure is the median of
/// `--repeats` timed loops, in ns per message, all in one process, in the same run.
///
/// Foundation's decoder here is given the same typed shape (a `type` discriminator, then the
/// payload) but none of the protocol's strictness (duplicate keys, exact integers, limits).
enum BenchCodecCommand {
  static func run(_ arguments: ArgumentList) async throws -> Int32 {
    let iterations = try arguments.int("iterations", default: 50_000)
    let repeats = try arguments.int("repeats", default: 5)
    guard iterations > 0, iterations <= 5_000_000, repeats > 0, repeats <= 50 else {
      throw ArgumentError(message: "--iterations must be 1...5000000 and --repeats 1...50")
    }
    let candidateIn = Array(
      #"{"type":"candidate","id":"c-17","callId":"3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69","candidate":{"candidate":"candidate:1 1 udp 2122260223 192.0.2.10 54321 typ host generation 0","sdpMid":"0","sdpMLineIndex":0}}"#
        .utf8)
    let inviteIn = Array(
      #"{"type":"invite","id":"i-1","callId":"3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69","to":"bob","video":false,"offer":{"sdp":"\#(offerSDP)"}}"#
        .utf8)
    let relayed = ServerMessage.candidate(
      .init(
        callId: "3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", from: Peer(userId: "alice", deviceId: "phone"),
        candidate: IceCandidate(
          candidate: "candidate:1 1 udp 2122260223 192.0.2.10 54321 typ host generation 0", sdpMid: "0",
          sdpMLineIndex: 0)))
    let relayedDTO = CandidateOut(
      type: "candidate", seq: 42, callId: "3f2c1a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69",
      from: .init(userId: "alice", deviceId: "phone"),
      candidate: .init(
        candidate: "candidate:1 1 udp 2122260223 192.0.2.10 54321 typ host generation 0", sdpMid: "0",
        sdpMLineIndex: 0))
    // Both must understand the inputs before anything is timed.
    _ = try MessageCodec.decodeClientMessage(candidateIn)
    _ = try MessageCodec.decodeClientMessage(inviteIn)
    _ = try decodeWithFoundation(Data(candidateIn))
    _ = try decodeWithFoundation(Data(inviteIn))

    let decoder = JSONDecoder()
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let candidateData = Data(candidateIn)
    let inviteData = Data(inviteIn)
    let rows: [(String, Double, Double)] = [
      (
        "decode candidate", try time(iterations, repeats) { _ = try MessageCodec.decodeClientMessage(candidateIn) },
        try time(iterations, repeats) { _ = try decodeWithFoundation(candidateData, decoder) }
      ),
      (
        "decode invite (1.4 KB offer)",
        try time(iterations / 4, repeats) { _ = try MessageCodec.decodeClientMessage(inviteIn) },
        try time(iterations / 4, repeats) { _ = try decodeWithFoundation(inviteData, decoder) }
      ),
      (
        "encode relayed candidate", try time(iterations, repeats) { _ = MessageCodec.encode(relayed, seq: 42) },
        try time(iterations, repeats) { _ = try encoder.encode(relayedDTO) }
      ),
    ]
    let treeOnly = try time(iterations, repeats) { _ = JSONValue(parsing: candidateIn) }

    print("bench-codec: \(iterations) messages per loop (invites: \(iterations / 4)), median of \(repeats) loops")
    print("message                          dialtone ns/msg   Foundation ns/msg   Foundation / dialtone")
    for (name, ours, theirs) in rows {
      print(
        name.padding(toLength: 32, withPad: " ", startingAt: 0)
          + String(format: " %15.0f   %17.0f   %20.2f", ours, theirs, theirs / ours))
    }
    print(String(format: "of which the JSONValue tree alone (candidate): %.0f ns/msg", treeOnly))
    return 0
  }

  /// Median nanoseconds per call of `body`, over `repeats` loops of `count` calls.
  private static func time(_ count: Int, _ repeats: Int, _ body: () throws -> Void) throws -> Double {
    var samples: [Double] = []
    for _ in 0..<repeats {
      let start = DispatchTime.now().uptimeNanoseconds
      for _ in 0..<max(1, count) { try body() }
      samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(max(1, count)))
    }
    return Quantile.of(samples.sorted(), 0.5)
  }

  // MARK: The same messages as Codable types

  private struct Kind: Decodable { let type: String }
  private struct IceCandidateDTO: Codable {
    let candidate: String
    let sdpMid: String?
    let sdpMLineIndex: Int?
  }
  private struct CandidateIn: Decodable {
    let id: String
    let callId: String
    let candidate: IceCandidateDTO
  }
  private struct OfferDTO: Decodable { let sdp: String }
  private struct InviteIn: Decodable {
    let id: String
    let callId: String
    let to: String
    let video: Bool
    let offer: OfferDTO?
  }
  private struct PeerDTO: Codable {
    let userId: String
    let deviceId: String
  }
  private struct CandidateOut: Encodable {
    let type: String
    let seq: UInt64
    let callId: String
    let from: PeerDTO
    let candidate: IceCandidateDTO
  }

  private enum FoundationMessage {
    case candidate(CandidateIn)
    case invite(InviteIn)
  }

  /// A type-discriminated decode, the usual Codable way: the discriminator, then the payload.
  private static func decodeWithFoundation(_ data: Data, _ decoder: JSONDecoder = JSONDecoder()) throws
    -> FoundationMessage
  {
    switch try decoder.decode(Kind.self, from: data).type {
    case "candidate": return .candidate(try decoder.decode(CandidateIn.self, from: data))
    case "invite": return .invite(try decoder.decode(InviteIn.self, from: data))
    default: throw ArgumentError(message: "unexpected type")
    }
  }

  /// A Chromium-like audio offer, about 1.4 KB, with its newlines escaped for JSON.
  private static let offerSDP =
    [
      "v=0", "o=- 4611731400430051336 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
      "a=extmap-allow-mixed", "a=msid-semantic: WMS stream",
      "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126", "c=IN IP4 0.0.0.0", "a=rtcp:9 IN IP4 0.0.0.0",
      "a=ice-ufrag:Fq1d", "a=ice-pwd:3c0d1Yk3Jv4sVVBn1sJqg0Xb", "a=ice-options:trickle",
      "a=fingerprint:sha-256 4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB:4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF",
      "a=setup:actpass", "a=mid:0", "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level",
      "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time", "a=sendrecv",
      "a=msid:stream audio0", "a=rtcp-mux", "a=rtpmap:111 opus/48000/2", "a=rtcp-fb:111 transport-cc",
      "a=fmtp:111 minptime=10;useinbandfec=1", "a=rtpmap:63 red/48000/2", "a=fmtp:63 111/111",
      "a=rtpmap:9 G722/8000", "a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000", "a=rtpmap:13 CN/8000",
      "a=rtpmap:110 telephone-event/48000", "a=rtpmap:126 telephone-event/8000",
      "a=ssrc:3735928559 cname:dialtone", "a=ssrc:3735928559 msid:stream audio0",
      "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=ice-ufrag:Fq1d",
      "a=ice-pwd:3c0d1Yk3Jv4sVVBn1sJqg0Xb", "a=ice-options:trickle",
      "a=fingerprint:sha-256 4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF:3E:5D:49:6B:19:E5:7C:AB:4A:AD:B9:B1:3F:82:18:3B:54:02:12:DF",
      "a=setup:actpass", "a=mid:1", "a=sctp-port:5000", "a=max-message-size:262144",
    ].joined(separator: "\\r\\n") + "\\r\\n"
}
