import DialtoneJSON
import DialtoneProtocol
import Foundation
import Testing

@Suite("Server → client messages")
struct ServerMessageTests {
  @Test("every server message round-trips, lenient and strict", arguments: Fixtures.serverMessages)
  func roundTrip(_ message: ServerMessage) throws {
    let seq: UInt64? = message.knownType == .welcome ? nil : 41
    let bytes = MessageCodec.encode(message, seq: seq)
    let lenient = try MessageCodec.decodeServerMessage(bytes)
    #expect(lenient == ServerEnvelope(seq: seq, message: message))
    let strict = try MessageCodec.decodeServerMessage(bytes, options: .strict)
    #expect(strict == lenient)
    #expect(try MessageCodec.decodeServerMessage(Data(bytes)) == lenient)
    #expect(MessageCodec.encode(lenient) == bytes)
    #expect(MessageCodec.encodeString(message, seq: seq) == text(bytes))
  }

  @Test func everyTypeIsCovered() {
    let covered = Set(Fixtures.serverMessages.compactMap(\.knownType))
    #expect(covered == Set(ServerMessageType.allCases))
  }

  /// A message reaches the desk its type's rules name, so clients route by the rules and
  /// switch exhaustively over one desk's messages.
  @Test("every server message is routed to its type's desk", arguments: Fixtures.serverMessages)
  func routedToItsDesk(_ message: ServerMessage) throws {
    let type = try #require(message.knownType)
    switch (message.routed, type.rules.desk) {
    case (.session, .session), (.oneToOne, .oneToOne), (.group, .group): break
    case (.session, _), (.oneToOne, _), (.group, _), (.unknown, _):
      Issue.record("\(type.rawValue) is routed as \(message.routed), its rules say \(type.rules.desk)")
    }
    if type.rules.desk != .session { #expect(message.replyTo == nil) }
  }

  @Test func anUnknownTypeIsRoutedToNoDesk() {
    let unknown = ServerMessage.unknown(.init(type: "from-the-future", json: .object([:])))
    #expect(unknown.routed == .unknown(.init(type: "from-the-future", json: .object([:]))))
    #expect(unknown.replyTo == nil)
  }

  @Test func accessors() {
    let ended = ServerMessage.callEnded(.init(callId: "c1", reason: .missed))
    #expect(ended.callId == "c1")
    #expect(ended.typeName == "call-ended")
    #expect(ended.replyTo == nil)
    let ack = ServerMessage.ack(.init(replyTo: "m1"))
    #expect(ack.replyTo == "m1")
    #expect(ack.callId == nil)
  }

  // MARK: Exact shapes (keep in step with docs/protocol.md)

  @Test func exactWelcome() {
    let welcome = ServerMessage.welcome(
      .init(
        replyTo: "h1", sessionId: "s_1", userId: "alice", deviceId: "phone", resumed: false, resync: false,
        iceServers: [IceServer(urls: ["stun:127.0.0.1:3478"])]))
    #expect(
      MessageCodec.encodeString(welcome, seq: nil)
        == #"{"deviceId":"phone","heartbeatSeconds":25,"iceServers":[{"urls":["stun:127.0.0.1:3478"]}],"iceServersTtl":43200,"maxMessageBytes":65536,"replyTo":"h1","resumed":false,"resync":false,"sessionId":"s_1","type":"welcome","userId":"alice","version":1}"#
    )
  }

  @Test func exactInviteAndCallEnded() {
    let invite = ServerMessage.invite(
      .init(
        callId: "c1", from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: false,
        offer: .init(sdp: "v=0"), createdAt: 1_732_880_000_000))
    #expect(
      MessageCodec.encodeString(invite, seq: 3)
        == #"{"callId":"c1","createdAt":1732880000000,"from":{"deviceId":"phone","name":"Alice","userId":"alice"},"offer":{"sdp":"v=0"},"seq":3,"type":"invite","video":false}"#
    )
    let ended = ServerMessage.callEnded(.init(callId: "c2", reason: .glare, replacedBy: "c1"))
    #expect(
      MessageCodec.encodeString(ended, seq: 9)
        == #"{"callId":"c2","reason":"glare","replacedBy":"c1","seq":9,"type":"call-ended"}"#)
  }

  @Test func exactAckAndErrors() {
    #expect(MessageCodec.encodeString(.ack(.init(replyTo: "p1")), seq: 4) == #"{"replyTo":"p1","seq":4,"type":"ack"}"#)
    #expect(
      MessageCodec.encodeString(
        .ack(
          .init(
            replyTo: "g1", callId: "c1",
            call: CallState(
              callId: "c1", callerId: "alice", calleeId: "bob", callerDeviceId: "phone", video: false, state: .ringing,
              createdAt: 5))), seq: 5)
        == #"{"call":{"callId":"c1","calleeId":"bob","callerDeviceId":"phone","callerId":"alice","createdAt":5,"state":"ringing","video":false},"callId":"c1","replyTo":"g1","seq":5,"type":"ack"}"#
    )
    // A pre-session error has no seq.
    #expect(
      MessageCodec.encodeString(
        .error(.init(replyTo: "h1", code: .unsupportedVersion, message: "version 2 is not supported")), seq: nil)
        == #"{"code":"unsupported-version","message":"version 2 is not supported","replyTo":"h1","type":"error"}"#)
    // ProtocolError → error message, as the server sends it.
    let error = clientError(#"{"type":"candidate","id":"k1","callId":"c1","candidate":{"candidate":1}}"#)
    #expect(
      error.map { MessageCodec.encodeString($0.serverMessage, seq: 12) }
        == #"{"callId":"c1","code":"bad-request","message":"\"candidate.candidate\" must be a string","replyTo":"k1","seq":12,"type":"error"}"#
    )
  }

  @Test func exactOfferWithIceRestart() {
    let offer = ServerMessage.offer(
      .init(callId: "c1", from: Peer(userId: "alice", deviceId: "phone"), sdp: "v=0", iceRestart: true))
    #expect(
      MessageCodec.encodeString(offer, seq: 30)
        == #"{"callId":"c1","from":{"deviceId":"phone","userId":"alice"},"iceRestart":true,"sdp":"v=0","seq":30,"type":"offer"}"#
    )
  }

  @Test func stringEscaping() throws {
    let error = ServerMessage.error(
      .init(code: .badRequest, message: "quote \" backslash \\ slash / nl \n cr \r tab \t bell \u{07} é 😀"))
    let encoded = MessageCodec.encodeString(error, seq: nil)
    #expect(
      encoded
        == #"{"code":"bad-request","message":"quote \" backslash \\ slash / nl \n cr \r tab \t bell \u0007 é 😀","type":"error"}"#
    )
    #expect(try MessageCodec.decodeServerMessage(encoded).message == error)
  }

  // MARK: Forward compatibility (client side)

  @Test func unknownTypeIsKeptAndSeqIsAvailable() throws {
    let envelope = try MessageCodec.decodeServerMessage(#"{"type":"screen-share","seq":8,"room":"r1"}"#)
    #expect(envelope.seq == 8)
    guard case .unknown(let unknown) = envelope.message else {
      Issue.record("expected .unknown")
      return
    }
    #expect(unknown.type == "screen-share")
    #expect(unknown.json["room"] == "r1")
    #expect(envelope.message.typeName == "screen-share")
    #expect(envelope.message.knownType == nil)
    // Strict decoding refuses it.
    let error = serverError(#"{"type":"screen-share","seq":8}"#, options: .strict)
    #expect(error?.code == .unknownType)
    #expect(error?.seq == 8)
  }

  @Test func unknownEnumValuesDecodeLeniently() throws {
    let ended = try MessageCodec.decodeServerMessage(
      #"{"type":"call-ended","seq":2,"callId":"c1","reason":"vanished"}"#)
    #expect(ended.message == .callEnded(.init(callId: "c1", reason: .failed)))
    let error = try MessageCodec.decodeServerMessage(#"{"type":"error","seq":3,"code":"teapot","message":"no"}"#)
    #expect(error.message == .error(.init(code: .internal, message: "no")))
    #expect(
      serverError(#"{"type":"call-ended","seq":2,"callId":"c1","reason":"vanished"}"#, options: .strict)?.code
        == .badRequest)
    #expect(EndReason(lenient: "answered-elsewhere") == .answeredElsewhere)
    #expect(ErrorCode(lenient: "not-found") == .notFound)
  }

  @Test func lenientDecodingSkipsLimits() throws {
    let sdp = String(repeating: "a", count: Limits.maxSDPBytes + 10)
    let frame = MessageCodec.encode(.answer(.init(callId: "c1", from: Fixtures.bob, sdp: sdp)), seq: 1)
    #expect(
      try MessageCodec.decodeServerMessage(frame).message == .answer(.init(callId: "c1", from: Fixtures.bob, sdp: sdp)))
    #expect(serverError(text(frame), options: .strict)?.code == .tooLarge)
  }

  @Test func unknownFieldsIgnored() throws {
    let envelope = try MessageCodec.decodeServerMessage(
      #"{"type":"ringing","seq":5,"callId":"c1","from":{"userId":"bob","deviceId":"tab","avatar":"x"},"future":1}"#)
    #expect(
      envelope
        == ServerEnvelope(seq: 5, message: .ringing(.init(callId: "c1", from: Peer(userId: "bob", deviceId: "tab")))))
  }

  @Test func iceServerUrlsMayBeASingleString() throws {
    let server = try IceServer(json: JSONValue.parse(Array(#"{"urls":"stun:example.org"}"#.utf8)))
    #expect(server == IceServer(urls: ["stun:example.org"]))
    #expect(server.jsonString == #"{"urls":["stun:example.org"]}"#)
    #expect(throws: ProtocolError(.badRequest, "\"urls\" must not be empty")) {
      try IceServer(jsonBytes: Array(#"{"urls":[]}"#.utf8))
    }
    #expect(throws: ProtocolError(.badRequest, "\"urls[1]\" must be a string")) {
      try IceServer(jsonBytes: Array(#"{"urls":["stun:a",1]}"#.utf8))
    }
  }

  // MARK: Errors

  @Test func decodeErrorsCarrySeqSoTheClientCanStillAck() {
    let error = serverError(#"{"type":"candidate","seq":14,"callId":"c1","from":{"userId":"a","deviceId":"d"}}"#)
    #expect(
      error == ProtocolError(.badRequest, "\"candidate\" is required", callId: "c1", messageType: "candidate", seq: 14))
  }

  @Test func serverDecodeErrors() {
    #expect(serverError("") == ProtocolError(.badRequest, "empty message"))
    #expect(serverError("[]") == ProtocolError(.badRequest, "message must be a JSON object"))
    #expect(serverError("{]")?.message.hasPrefix("malformed JSON:") == true)
    #expect(serverError(#"{"seq":1}"#) == ProtocolError(.badRequest, "\"type\" is required", seq: 1))
    #expect(serverError(#"{"type":"ack","seq":"1","replyTo":"x"}"#)?.message == "\"seq\" must be an integer")
    #expect(serverError(#"{"type":"ack","seq":1}"#)?.message == "\"replyTo\" is required")
    #expect(
      serverError(#"{"type":"invite","seq":1,"callId":"c","from":{"userId":"a"},"video":true,"createdAt":1}"#)?.message
        == "\"from.deviceId\" is required")
    #expect(
      serverError(
        #"{"type":"invite","seq":1,"callId":"c","from":{"userId":"a","deviceId":"d"},"video":true,"createdAt":"now"}"#)?
        .message == "\"createdAt\" must be an integer")
    #expect(
      serverError(
        #"{"type":"welcome","replyTo":"h","version":1,"sessionId":"s","userId":"u","deviceId":"d","resumed":false,"resync":false,"heartbeatSeconds":25,"maxMessageBytes":65536,"iceServers":[{"urls":["stun:x"]},{"username":"u"}],"iceServersTtl":60}"#
      )?.message == "\"iceServers[1].urls\" is required")
    #expect(
      serverError(
        #"{"type":"welcome","replyTo":"h","version":1,"sessionId":"s","userId":"u","deviceId":"d","resumed":false,"resync":false,"heartbeatSeconds":25,"maxMessageBytes":65536,"iceServers":[3],"iceServersTtl":60}"#
      )?.message == "\"iceServers[0]\" must be an object")
    #expect(
      serverError(
        #"{"type":"ack","seq":1,"replyTo":"g","call":{"callId":"c","callerId":"a","calleeId":"b","callerDeviceId":"d","video":false,"state":"paused","createdAt":1}}"#
      )?.message == "\"call.state\" must be one of ringing, accepted, ended")
  }
}
