import DialtoneJSON
import Testing

@testable import DialtoneProtocol

/// The relayed `candidate` and the plain `ack`, written field by field (`relayFrameBytes`),
/// against `WireEncoder`'s bytes for the same envelope: every optional member present or not,
/// texts that need escaping or are not ASCII, seqs from none to past `Int64.max`.
struct ServerEnvelopeRelayFramesTests {
  private static let texts = [
    "", "c", "0", "0f2a0e3c-5b8e-4c1e-9a55-3f1f6a2b7c90",
    "candidate:842163049 1 udp 1677729535 192.0.2.1 3478 typ srflx", "quote \" backslash \\ slash /",
    "tab\tnew\nline\r\u{8}\u{c}\u{1}\u{1f}", "héllo wörld 日本 🎧", String(repeating: "x", count: 600),
  ]
  private static let seqs: [UInt64?] = [nil, 0, 1, 41, 9_007_199_254_740_991, UInt64(Int64.max), .max]

  private static func text(_ n: Int) -> String { texts[n % texts.count] }
  private static func optionalText(_ n: Int) -> String? { n % 4 == 0 ? nil : text(n) }

  @Test func aPlainAckIsWireEncodersBytes() {
    var checked = 0
    for (r, replyTo) in Self.texts.enumerated() {
      for c in 0...Self.texts.count {
        let callId = c == Self.texts.count ? nil : Self.text(c + r)
        for seq in Self.seqs {
          let envelope = ServerEnvelope(seq: seq, message: .ack(.init(replyTo: replyTo, callId: callId)))
          #expect(envelope.relayFrameBytes == envelope.genericEncoded, "\(envelope)")
          #expect(envelope.encoded == envelope.genericEncoded)
          #expect(MessageCodec.encode(envelope.message, seq: seq) == envelope.genericEncoded)
          checked += 1
        }
      }
    }
    #expect(checked == Self.texts.count * (Self.texts.count + 1) * Self.seqs.count)
  }

  @Test func aCandidateIsWireEncodersBytes() {
    for n in 0..<400 {
      let candidate = IceCandidate(
        candidate: Self.text(n), sdpMid: Self.optionalText(n / 2), sdpMLineIndex: [nil, 0, 1, 99][n % 4],
        usernameFragment: Self.optionalText(n / 3 + 1))
      let from = Peer(userId: Self.text(n + 3), deviceId: Self.text(n / 5), name: Self.optionalText(n / 7 + 2))
      let message = ServerMessage.candidate(
        .init(callId: Self.text(n + 1), from: from, candidate: candidate, leg: n % 3 == 0))
      let envelope = ServerEnvelope(seq: Self.seqs[n % Self.seqs.count], message: message)
      #expect(envelope.relayFrameBytes == envelope.genericEncoded, "\(envelope)")
      #expect(envelope.encoded == envelope.genericEncoded)
      #expect(MessageCodec.encode(message, seq: envelope.seq) == envelope.genericEncoded)
    }
  }

  /// Any other message (an ack carrying a call's or a group's state among them) goes through
  /// `WireEncoder` as before.
  @Test func otherMessagesAreNotWrittenHere() {
    let withCall = ServerMessage.ack(
      .init(
        replyTo: "r", callId: "c",
        call: CallState(
          callId: "c", callerId: "a", calleeId: "b", callerDeviceId: "d", video: false, state: .ringing, createdAt: 1)))
    #expect(ServerEnvelope(seq: 3, message: withCall).relayFrameBytes == nil)
    let error = ServerMessage.error(.init(replyTo: "r", code: .badRequest, message: "no"))
    #expect(ServerEnvelope(seq: 3, message: error).relayFrameBytes == nil)
    // `MessageCodec.encode` writes them through `WireEncoder`, as the envelope does.
    for message in [withCall, error] {
      #expect(MessageCodec.encode(message, seq: 3) == ServerEnvelope(seq: 3, message: message).genericEncoded)
      #expect(MessageCodec.encode(message, seq: nil) == ServerEnvelope(seq: nil, message: message).genericEncoded)
    }
  }

  /// Every byte below 0x80 in every text of a candidate (written counted first, then into memory
  /// of exactly that size): the same bytes as `WireEncoder`'s, and exactly as many as counted.
  @Test func everyByteBelow0x80InEveryFieldIsWireEncodersBytes() {
    for byte in 0..<0x80 {
      let text = "a\(String(UnicodeScalar(UInt8(byte))))b"
      let candidate = IceCandidate(candidate: text, sdpMid: text, sdpMLineIndex: byte, usernameFragment: text)
      let message = ServerMessage.candidate(
        .init(callId: "call-1", from: Peer(userId: text, deviceId: text, name: text), candidate: candidate, leg: true))
      let envelope = ServerEnvelope(seq: UInt64(byte), message: message)
      #expect(envelope.relayFrameBytes == envelope.genericEncoded, "byte \(byte)")
      let ack = ServerEnvelope(seq: UInt64(byte), message: .ack(.init(replyTo: text, callId: "call-1")))
      #expect(ack.relayFrameBytes == ack.genericEncoded, "byte \(byte)")
    }
  }

  /// A client's candidate as the server decodes it — escapes of every kind in its text (`\u`
  /// escapes, an escaped slash, a surrogate pair), text that is not ASCII, every field at its
  /// limit — relayed as `WireEncoder`'s bytes; one byte over a limit is still refused with the
  /// same error.
  @Test func aDecodedCandidateAtItsLimitsWithEscapesIsRelayedAsWireEncodersBytes() throws {
    let line = "candidate:1 1 udp 2122260223 192.0.2.1 \\u0041\\/\\\"\\\\\\n\\ud83c\\udfa7 é日"
    let longLine = String(repeating: "x", count: Limits.maxCandidateBytes)
    let field = String(repeating: "m", count: Limits.maxCandidateFieldBytes)
    for text in [line, longLine] {
      let frame = """
        {"type":"candidate","id":"\(String(repeating: "i", count: Limits.maxMessageIDBytes))",\
        "callId":"\(String(repeating: "c", count: Limits.maxCallIDBytes))",\
        "candidate":{"usernameFragment":"\(field)","candidate":"\(text)","sdpMid":"\(field)",\
        "sdpMLineIndex":\(Limits.maxSDPMLineIndex)}}
        """
      let decoded = try MessageCodec.decodeClientMessage(Array(frame.utf8))
      guard case .candidate(let m) = decoded.message else {
        Issue.record("not a candidate: \(decoded)")
        continue
      }
      let from = Peer(userId: "u", deviceId: "d")
      let relayed = ServerEnvelope(
        seq: 7, message: .candidate(.init(callId: m.callId, from: from, candidate: m.candidate)))
      #expect(relayed.relayFrameBytes == relayed.genericEncoded)
      #expect(relayed.encoded == relayed.genericEncoded)
    }
    let overLimit = """
      {"type":"candidate","id":"r1","callId":"c1","candidate":{"candidate":"\(longLine)x"}}
      """
    #expect(throws: ProtocolError.self) { try MessageCodec.decodeClientMessage(Array(overLimit.utf8)) }
    do throws(ProtocolError) {
      _ = try MessageCodec.decodeClientMessage(Array(overLimit.utf8))
    } catch {
      #expect(error.code == .tooLarge)
      #expect(error.message == "\"candidate.candidate\" exceeds \(Limits.maxCandidateBytes) bytes")
      #expect(error.replyTo == "r1")
    }
  }
  /// The one-pass writer: `JSONWriter`'s bytes for the same pieces; it stops (position nil, and
  /// the frame is written again by `JSONWriter`) at a string that needs an escape or a piece that
  /// does not fit its room, a number among them.
  @Test func onePassFrameWritesJSONWritersBytesOrStops() {
    func pieces(_ text: String, _ number: Int64, to out: inout some RelayFrameSink) {
      out.raw("{\"k\":")
      out.string(text)
      out.raw(",\"n\":")
      out.integer(number)
      out.raw("}")
    }
    let numbers: [Int64] = [0, 7, 10, 99, 100, -1, -10, 1_000_000_007, .max, .min]
    for text in ["", "plain", "quote \"", "ctl\u{1}", "é"] {
      for number in numbers {
        var writer = JSONWriter()
        pieces(text, number, to: &writer)
        let needsEscape = text.contains("\"") || text.contains("\u{1}")
        for room in [writer.bytes.count + 21, writer.bytes.count - 1] {
          withUnsafeTemporaryAllocation(of: UInt8.self, capacity: room) { buffer in
            guard let base = buffer.baseAddress else { return }
            var frame = OnePassFrame(at: base, end: base + room)
            pieces(text, number, to: &frame)
            if needsEscape || room < writer.bytes.count + 21 {
              #expect(frame.position == nil, "\(text) \(number) room \(room)")
            } else {
              let written = frame.position.map { UnsafeBufferPointer(start: base, count: $0 - base) }
              #expect(written.map(Array.init) == writer.bytes, "\(text) \(number)")
            }
          }
        }
      }
    }
  }
}
