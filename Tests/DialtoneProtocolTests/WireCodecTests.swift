import DialtoneJSON
import DialtoneProtocol
import Testing

/// Properties of the codec itself, over every fixture.
@Suite("Wire codec")
struct WireCodecTests {
  /// Keys of every object in `bytes`, in the order they were written, checked to ascend byte-wise.
  private func keysAscend(_ bytes: [UInt8]) throws -> Bool {
    try JSONTape.parse(bytes, maxDepth: 32, syntaxError: unchanged) {
      (tape: JSONTape) throws(JSONSyntaxError) -> Bool in
      func check(_ index: JSONTape.Index) -> Bool {
        switch tape.kind(index) {
        case .object:
          let members = tape.members(index)
          let keys = members.map { Array($0.key.utf8) }
          return zip(keys, keys.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) }
            && members.allSatisfy { check($0.value) }
        case .array: return tape.elements(index).allSatisfy(check)
        default: return true
        }
      }
      return check(tape.root)
    }
  }

  @Test("a fan-out copy is the same bytes as encoding the message with that seq", arguments: Fixtures.serverMessages)
  func frameSplicesTheSeq(_ message: ServerMessage) {
    let frame = ServerFrame(message)
    for seq: UInt64 in [0, 1, 41, 1_000_000, Limits.maxSeq] {
      #expect(frame.bytes(seq: seq) == MessageCodec.encode(message, seq: seq))
    }
  }

  /// A plain ack (half of what a relaying server sends) is the same bytes as a fan-out frame's,
  /// escapes and all, with and without seq.
  @Test func aPlainAckIsTheGeneralEncodersBytes() {
    let texts = ["r1", "req-\u{1}\n\t\"q\"\\", "é✓\u{1F600}", String(repeating: "x", count: 300), "c\u{7f}\u{0}"]
    for replyTo in texts {
      for callId in [nil] + texts {
        let message = ServerMessage.ack(.init(replyTo: replyTo, callId: callId))
        for seq: UInt64 in [0, 7, Limits.maxSeq] {
          let general = ServerFrame(message).bytes(seq: seq)
          #expect(MessageCodec.encode(message, seq: seq) == general)
          let seqMember = Array(#","seq":\#(seq)"#.utf8)
          var withoutSeq = general
          if let range = general.firstRange(of: seqMember) { withoutSeq.removeSubrange(range) }
          #expect(withoutSeq != general)
          #expect(MessageCodec.encode(message, seq: nil) == withoutSeq)
        }
      }
    }
    #expect(
      MessageCodec.encodeString(.ack(.init(replyTo: "r", callId: "c")), seq: 3)
        == #"{"callId":"c","replyTo":"r","seq":3,"type":"ack"}"#)
  }

  @Test(
    "split around its seq, a frame is the same bytes with any seq put between", arguments: Fixtures.serverMessages)
  func frameSplitsAtTheSeq(_ message: ServerMessage) {
    let (head, tail) = ServerFrame(message).splitAtSeq
    for seq: UInt64 in [1, 41, Limits.maxSeq] {
      #expect(head + Array(String(seq).utf8) + tail == MessageCodec.encode(message, seq: seq))
    }
  }

  @Test func aFrameOfAnUnknownMessageKeepsItsFields() throws {
    let decoded = try MessageCodec.decodeServerMessage(#"{"type":"screen-share","seq":3,"room":{"id":"r"}}"#)
    let frame = ServerFrame(decoded.message)
    #expect(
      String(decoding: frame.bytes(seq: 9), as: UTF8.self) == #"{"room":{"id":"r"},"seq":9,"type":"screen-share"}"#)
    let (head, tail) = frame.splitAtSeq
    #expect(
      String(decoding: head + Array("9".utf8) + tail, as: UTF8.self)
        == String(decoding: frame.bytes(seq: 9), as: UTF8.self))
  }

  @Test("frames are written with keys in byte-wise order", arguments: Fixtures.serverMessages)
  func serverKeysAscend(_ message: ServerMessage) throws {
    #expect(try keysAscend(MessageCodec.encode(message, seq: 7)))
    #expect(try keysAscend(MessageCodec.encode(message, seq: nil)))
  }

  @Test func clientKeysAscend() throws {
    for frame in Fixtures.clientMessages { #expect(try keysAscend(MessageCodec.encode(frame)), "\(frame)") }
  }

  @Test func bodiesKeysAscend() throws {
    let push = IncomingCallPush(
      callId: "c1", callerId: "alice", callerDeviceId: "phone", callerName: "A", hasVideo: true, createdAt: 5)
    let bodies: [any WireCodable] = [
      Fixtures.callState, push, MissedCallPush(missed: push), ErrorBody(code: .notFound, message: "x"),
      MeResponse(userId: "u", deviceId: "d", name: "n", devices: [LiveDevice(deviceId: "d", connectedAt: 1)]),
      IceServersResponse(iceServers: [Fixtures.turn, Fixtures.stun]),
      DeviceRegistration(
        installationId: "i", platform: .ios, voipToken: "aa", alertToken: "bb", bundleId: "b",
        apnsEnvironment: .sandbox),
      DeviceInfo(installationId: "i", deviceId: "d", platform: .android, hasFcmToken: true, updatedAt: 1),
      CallHistoryResponse(
        calls: [CallRecord(callId: "c", callerId: "a", calleeId: "b", video: false, createdAt: 1)], next: "n"),
      HealthResponse(version: "1"),
    ]
    for body in bodies { #expect(try keysAscend(MessageCodec.encode(body)), "\(body)") }
  }

  /// The decoder reads only the fields it wants, but the whole frame is still checked: a fault
  /// in a member nobody reads fails the frame as it did when every value became a tree.
  @Test func unreadMembersAreStillValidated() throws {
    let faults = [
      #"{"type":"ping","id":"p","extra":{"a":1,"a":2}}"#,  // duplicate key, nested
      #"{"type":"ping","id":"p","extra":"\ud800"}"#,  // lone surrogate
      #"{"type":"ping","id":"p","extra":[1,]}"#,  // trailing comma
      #"{"type":"ping","id":"p","extra":01}"#,  // leading zero
      "{\"type\":\"ping\",\"id\":\"p\",\"extra\":" + String(repeating: "[", count: 40)
        + String(repeating: "]", count: 40) + "}",  // too deep
    ]
    for text in faults {
      #expect(throws: ProtocolError.self, "\(text)") { try MessageCodec.decodeClientMessage(text) }
      #expect((try? MessageCodec.decodeServerMessage(text)) == nil, "\(text)")
    }
    var invalidUTF8 = Array(#"{"type":"ping","id":"p","extra":"x"}"#.utf8)
    invalidUTF8[33] = 0xFF
    #expect(throws: ProtocolError.self) { try MessageCodec.decodeClientMessage(invalidUTF8) }
    // And the same frame without the fault decodes.
    #expect(
      try MessageCodec.decodeClientMessage(#"{"type":"ping","id":"p","extra":{"a":1,"b":[1,{"c":"\u00e9"}]}}"#)
        == ClientEnvelope(id: "p", message: .ping(.init())))
  }

  @Test func payloadsCarryNoEnvelope() {
    // The id is the envelope's: the same message goes out under any id.
    let message = ClientMessage.hangup(.init(callId: "c1"))
    #expect(
      MessageCodec.encodeString(message, id: "r1") == #"{"callId":"c1","id":"r1","type":"hangup"}"#)
    #expect(
      MessageCodec.encodeString(message, id: "r2") == #"{"callId":"c1","id":"r2","type":"hangup"}"#)
  }
}

private func unchanged(_ error: JSONSyntaxError) -> JSONSyntaxError { error }
