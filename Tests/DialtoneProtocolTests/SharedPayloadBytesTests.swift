import DialtoneProtocol
import Testing

/// The exact bytes of the payloads one type describes for more than one message: the client's
/// and the server's `group-candidate`, `group-end-of-candidates` and `group-stream-ended`, and the
/// two history pages. The literals are what the codec wrote before these types were shared
/// (main 60892f3), so a shared description that named a key, a rule or an order wrongly fails here.
@Suite("Shared payload bytes")
struct SharedPayloadBytesTests {
  static let candidate = IceCandidate(candidate: "candidate:1 1 udp 2122260223 10.0.0.2 50000 typ host", sdpMid: "0")

  @Test func clientGroupStreamMessages() throws {
    let frames: [(ClientEnvelope, String)] = [
      (
        ClientEnvelope(
          id: "g12", message: .groupCandidate(.init(callId: "c1", stream: "publisher", candidate: Self.candidate))),
        #"{"callId":"c1","candidate":{"candidate":"candidate:1 1 udp 2122260223 10.0.0.2 50000 typ host","sdpMid":"0"},"id":"g12","stream":"publisher","type":"group-candidate"}"#
      ),
      (
        ClientEnvelope(id: "g13", message: .groupEndOfCandidates(.init(callId: "c1", stream: "feed-7"))),
        #"{"callId":"c1","id":"g13","stream":"feed-7","type":"group-end-of-candidates"}"#
      ),
    ]
    for (frame, bytes) in frames {
      #expect(MessageCodec.encodeString(frame) == bytes)
      #expect(try MessageCodec.decodeClientMessage(bytes) == frame)
    }
  }

  @Test func serverGroupStreamMessages() throws {
    let frames: [(ServerMessage, String)] = [
      (
        .groupCandidate(.init(callId: "c1", stream: "feed-7", candidate: Self.candidate)),
        #"{"callId":"c1","candidate":{"candidate":"candidate:1 1 udp 2122260223 10.0.0.2 50000 typ host","sdpMid":"0"},"seq":41,"stream":"feed-7","type":"group-candidate"}"#
      ),
      (
        .groupStreamEnded(.init(callId: "c1", stream: "feed-7")),
        #"{"callId":"c1","seq":41,"stream":"feed-7","type":"group-stream-ended"}"#
      ),
    ]
    for (message, bytes) in frames {
      #expect(MessageCodec.encodeString(message, seq: 41) == bytes)
      #expect(ServerFrame(message).bytes(seq: 41) == Array(bytes.utf8))
      #expect(
        try MessageCodec.decodeServerMessage(bytes, options: .strict) == ServerEnvelope(seq: 41, message: message))
    }
  }

  /// The stream's rule (1...64 bytes) holds in both directions: strict decoding refuses a longer one.
  @Test func aStreamOverItsLimitIsRefusedBothWays() {
    let stream = String(repeating: "s", count: Limits.maxStreamIDBytes + 1)
    let client = #"{"callId":"c1","id":"g13","stream":"\#(stream)","type":"group-end-of-candidates"}"#
    let server = #"{"callId":"c1","seq":41,"stream":"\#(stream)","type":"group-stream-ended"}"#
    #expect(throws: ProtocolError.self) { try MessageCodec.decodeClientMessage(client) }
    #expect(throws: ProtocolError.self) { try MessageCodec.decodeServerMessage(server, options: .strict) }
    #expect(throws: ProtocolError.self) {
      try MessageCodec.decodeClientMessage(#"{"callId":"c1","id":"g13","stream":"","type":"group-end-of-candidates"}"#)
    }
  }

  @Test func historyPages() throws {
    let call = CallRecord(
      callId: "c1", callerId: "alice", calleeId: "bob", answeredBy: "laptop", video: false, createdAt: 1000,
      answeredAt: 3000, endedAt: 63000, endReason: .hangup, durationMs: 60000)
    let group = GroupCallRecord(
      callId: "g1", creatorId: "alice", title: "Standup", video: true, createdAt: 1000, endedAt: 9000,
      endReason: .completed, participants: [])
    #expect(
      CallHistoryResponse(calls: [call], next: "c1").jsonString
        == #"{"calls":[{"answeredAt":3000,"answeredBy":"laptop","callId":"c1","calleeId":"bob","callerId":"alice","createdAt":1000,"durationMs":60000,"endReason":"hangup","endedAt":63000,"video":false}],"next":"c1"}"#
    )
    #expect(CallHistoryResponse(calls: []).jsonString == #"{"calls":[]}"#)
    let groupPage =
      #"{"calls":[{"callId":"g1","createdAt":1000,"creatorId":"alice","endReason":"completed","endedAt":9000,"participants":[],"title":"Standup","video":true}],"next":"g0"}"#
    #expect(GroupCallHistoryResponse(calls: [group], next: "g0").jsonString == groupPage)
    #expect(try GroupCallHistoryResponse(jsonBytes: Array(groupPage.utf8)) == .init(calls: [group], next: "g0"))
    #expect(GroupCallHistoryResponse(calls: []).jsonString == #"{"calls":[]}"#)
    // `next`, when present, is never empty.
    #expect(throws: ProtocolError.self) {
      try GroupCallHistoryResponse(jsonBytes: Array(#"{"calls":[],"next":""}"#.utf8))
    }
    #expect(throws: ProtocolError.self) { try CallHistoryResponse(jsonBytes: Array(#"{"calls":[],"next":""}"#.utf8)) }
  }
}
