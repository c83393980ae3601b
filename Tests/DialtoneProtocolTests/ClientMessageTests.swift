import DialtoneProtocol
import Foundation
import Testing

@Suite("Client → server messages")
struct ClientMessageTests {
  @Test("every client message round-trips", arguments: Fixtures.clientMessages)
  func roundTrip(_ frame: ClientEnvelope) throws {
    let bytes = MessageCodec.encode(frame)
    let decoded = try MessageCodec.decodeClientMessage(bytes)
    #expect(decoded == frame)
    #expect(decoded.message.type == frame.message.type)
    // Data and String inputs decode identically.
    #expect(try MessageCodec.decodeClientMessage(Data(bytes)) == frame)
    #expect(try MessageCodec.decodeClientMessage(text(bytes)) == frame)
    // Encoding is deterministic.
    #expect(MessageCodec.encode(decoded) == bytes)
  }

  /// The server decodes its frames with one scratch, one after another: every frame, and every
  /// refusal, comes out as from a fresh decode, whatever came before it.
  @Test func aReusedScratchDecodesEveryFrameAsAFreshDecodeDoes() {
    let frames =
      Fixtures.clientMessages.map { MessageCodec.encode($0) }
      + [
        Array(#"{"type":"candidate","id":"x","callId":"c","candidate":{"candidate":"a","sdpMid":"0"},"n":1}"#.utf8),
        Array(#"{"type":"ack","seq":"#.utf8), Array("[]".utf8), [], Array(#"{"id":"\u00e9","type":"ping"}"#.utf8),
        Array(repeating: UInt8(ascii: " "), count: 70_000),
      ]
    var scratch = MessageCodec.DecodingScratch()
    for order in [frames, frames.reversed(), frames] {
      for (index, bytes) in order.enumerated() {
        let fresh = Result { () throws(ProtocolError) in try MessageCodec.decodeClientMessage(bytes) }
        let reused = Result { () throws(ProtocolError) in
          try MessageCodec.decodeClientMessage(bytes, scratch: &scratch)
        }
        #expect(fresh == reused, "frame \(index)")
      }
    }
  }

  @Test func everyTypeIsCovered() {
    let covered = Set(Fixtures.clientMessages.map(\.message.type.rawValue))
    #expect(covered == Set(ClientMessageType.allCases.map(\.rawValue)))
  }

  @Test func accessors() {
    let invite = ClientMessage.invite(.init(callId: Fixtures.callId, to: "bob", video: false))
    #expect(invite.callId == Fixtures.callId)
    #expect(invite.type == .invite)
    #expect(ClientMessage.hangup(.init(callId: "c9")).type == .hangup)
    #expect(ClientMessage.getCall(.init(callId: "c9")).callId == "c9")
    let ack = ClientMessage.ack(.init(seq: 3))
    #expect(ack.callId == nil)
    #expect(!ClientMessageType.ack.hasID)
    #expect(ClientMessageType.getCall.hasID)
    for frame in Fixtures.clientMessages {
      #expect((frame.id != nil) == frame.message.type.hasID)
    }
  }

  // MARK: Exact shapes (keep in step with docs/protocol.md)

  @Test func exactHello() {
    let hello = ClientEnvelope(
      id: "h1",
      message: ClientMessage.hello(
        .init(
          token: "T", resume: .init(sessionId: "s_1", lastSeq: 17),
          client: .init(name: "dialtone-ios", version: "1.0"))))
    #expect(
      MessageCodec.encodeString(hello)
        == #"{"client":{"name":"dialtone-ios","version":"1.0"},"id":"h1","resume":{"lastSeq":17,"sessionId":"s_1"},"token":"T","type":"hello","version":1}"#
    )
  }

  @Test func exactCandidate() {
    let message = ClientEnvelope(
      id: "m7",
      message: ClientMessage.candidate(
        .init(
          callId: "c1",
          candidate: IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 9 typ host", sdpMid: "0", sdpMLineIndex: 0)))
    )
    #expect(
      MessageCodec.encodeString(message)
        == #"{"callId":"c1","candidate":{"candidate":"candidate:1 1 udp 1 10.0.0.1 9 typ host","sdpMLineIndex":0,"sdpMid":"0"},"id":"m7","type":"candidate"}"#
    )
  }

  @Test func exactSmallMessages() {
    #expect(
      MessageCodec.encodeString(ClientEnvelope(id: nil, message: .ack(.init(seq: 42)))) == #"{"seq":42,"type":"ack"}"#)
    #expect(MessageCodec.encodeString(ClientEnvelope(id: "p", message: .ping(.init()))) == #"{"id":"p","type":"ping"}"#)
    #expect(
      MessageCodec.encodeString(
        ClientEnvelope(
          id: "m1", message: .invite(.init(callId: "c1", to: "bob", video: false, offer: .init(sdp: "v=0\r\n")))))
        == #"{"callId":"c1","id":"m1","offer":{"sdp":"v=0\r\n"},"to":"bob","type":"invite","video":false}"#)
    #expect(
      MessageCodec.encodeString(
        ClientEnvelope(id: "m2", message: .offer(.init(callId: "c1", sdp: "v=0", iceRestart: true))))
        == #"{"callId":"c1","iceRestart":true,"id":"m2","sdp":"v=0","type":"offer"}"#)
    #expect(
      MessageCodec.encodeString(ClientEnvelope(id: "m2", message: .offer(.init(callId: "c1", sdp: "v=0"))))
        == #"{"callId":"c1","id":"m2","sdp":"v=0","type":"offer"}"#)
    #expect(
      MessageCodec.encodeString(ClientEnvelope(id: "m3", message: .endOfCandidates(.init(callId: "c1"))))
        == #"{"callId":"c1","id":"m3","type":"end-of-candidates"}"#)
    #expect(
      MessageCodec.encodeString(ClientEnvelope(id: "m4", message: .iceRestartRequest(.init(callId: "c1"))))
        == #"{"callId":"c1","id":"m4","type":"ice-restart-request"}"#)
    #expect(
      MessageCodec.encodeString(ClientEnvelope(id: "m5", message: .getCall(.init(callId: "c1"))))
        == #"{"callId":"c1","id":"m5","type":"get-call"}"#)
  }

  // MARK: Lenient input

  @Test func unknownFieldsAreIgnored() throws {
    let message = try MessageCodec.decodeClientMessage(
      #"{"type":"answer","id":"a1","callId":"c1","sdp":"v=0","future":{"x":[1,2]},"extra":true}"#)
    #expect(message == ClientEnvelope(id: "a1", message: .answer(.init(callId: "c1", sdp: "v=0"))))
    // A browser's RTCSessionDescription.toJSON() carries "type" too.
    let accept = try MessageCodec.decodeClientMessage(
      #"{"type":"accept","id":"a2","callId":"c1","answer":{"type":"answer","sdp":"v=0"}}"#)
    #expect(accept == ClientEnvelope(id: "a2", message: .accept(.init(callId: "c1", answer: .init(sdp: "v=0")))))
    // An ack with an id is still an ack.
    #expect(
      try MessageCodec.decodeClientMessage(#"{"type":"ack","seq":3,"id":"x"}"#)
        == ClientEnvelope(id: nil, message: .ack(.init(seq: 3))))
  }

  @Test func nullMeansAbsent() throws {
    // RTCIceCandidate.toJSON() may carry nulls.
    let message = try MessageCodec.decodeClientMessage(
      #"{"type":"candidate","id":"c","callId":"c1","candidate":{"candidate":"candidate:1","sdpMid":null,"sdpMLineIndex":null,"usernameFragment":null}}"#
    )
    #expect(
      message
        == ClientEnvelope(
          id: "c", message: .candidate(.init(callId: "c1", candidate: IceCandidate(candidate: "candidate:1")))))
    let hello = try MessageCodec.decodeClientMessage(
      #"{"type":"hello","id":"h","version":1,"token":null,"resume":null}"#)
    #expect(hello == ClientEnvelope(id: "h", message: .hello(.init())))
  }

  @Test func whitespaceAndIntegralFloatsAreAccepted() throws {
    let message = try MessageCodec.decodeClientMessage(" \n{ \"type\" : \"ack\" , \"seq\" : 5.0 }\r\n")
    #expect(message == ClientEnvelope(id: nil, message: .ack(.init(seq: 5))))
    let hello = try MessageCodec.decodeClientMessage(#"{"type":"hello","id":"h","version":1e0}"#)
    #expect(hello == ClientEnvelope(id: "h", message: .hello(.init(version: 1))))
  }

  @Test func escapedStringsDecode() throws {
    let message = try MessageCodec.decodeClientMessage(
      #"{"type":"invite","id":"\u006d1","callId":"c1","to":"b\u00f6b","video":false,"callerName":"\ud83d\udcde A\"B\\"}"#
    )
    #expect(
      message
        == ClientEnvelope(
          id: "m1", message: .invite(.init(callId: "c1", to: "böb", video: false, callerName: "📞 A\"B\\"))))
  }

  @Test func iceRestartFalseDecodes() throws {
    let message = try MessageCodec.decodeClientMessage(
      #"{"type":"offer","id":"o","callId":"c1","sdp":"v=0","iceRestart":false}"#)
    #expect(message == ClientEnvelope(id: "o", message: .offer(.init(callId: "c1", sdp: "v=0"))))
  }

  @Test func limitsAtTheEdgeAreAccepted() throws {
    let sdp = String(repeating: "a", count: Limits.maxSDPBytes)
    let id = String(repeating: "i", count: Limits.maxMessageIDBytes)
    let callId = String(repeating: "C", count: Limits.maxCallIDBytes)
    let answer = ClientEnvelope(id: id, message: ClientMessage.answer(.init(callId: callId, sdp: sdp)))
    #expect(try MessageCodec.decodeClientMessage(MessageCodec.encode(answer)) == answer)
    let candidate = ClientEnvelope(
      id: "c",
      message: ClientMessage.candidate(
        .init(
          callId: "c1",
          candidate: IceCandidate(candidate: String(repeating: "x", count: Limits.maxCandidateBytes)))))
    #expect(try MessageCodec.decodeClientMessage(MessageCodec.encode(candidate)) == candidate)
    let user = String(repeating: "u", count: Limits.maxUserIDBytes)
    let invite = ClientEnvelope(
      id: "i",
      message: ClientMessage.invite(
        .init(callId: "c1", to: user, video: true, callerName: String(repeating: "n", count: Limits.maxNameBytes))))
    #expect(try MessageCodec.decodeClientMessage(MessageCodec.encode(invite)) == invite)
  }

  // MARK: Errors: framing

  @Test func emptyInput() {
    let error = clientError("")
    #expect(error == ProtocolError(.badRequest, "empty message"))
    #expect(error?.description == "bad-request: empty message")
  }

  @Test func malformedJSON() {
    let error = clientError(#"{"type":"ping","id":"p1""#)
    #expect(error?.code == .badRequest)
    #expect(error?.message.hasPrefix("malformed JSON:") == true)
    #expect(error?.replyTo == nil)
    for bad in [
      "{", "}", "nul", "{'a':1}", #"{"a":1,}"#, "[1,]", #"{"a" 1}"#, "01", "1.", "-", "+1", "\u{FEFF}{}",
      #"{"a":"\x"}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00x"}"#, "{\"a\":\"tab\tinside\"}", #"{"a":1}{"#, "NaN",
      #"{"a":1e999}"#, #"{"a":1,"a":2}"#,
    ] {
      let error = clientError(bad)
      #expect(error?.code == .badRequest, "input \(bad)")
      #expect(error?.message.hasPrefix("malformed JSON:") == true, "input \(bad): \(String(describing: error))")
    }
  }

  @Test func malformedJSONNamesThePosition() {
    let error = clientError(#"{"type":"ping" "id":"p"}"#)
    #expect(error?.message == "malformed JSON: expected ',' or '}' in object at byte 15")
    let duplicate = clientError(#"{"type":"ping","type":"ack"}"#)
    #expect(duplicate?.message == "malformed JSON: duplicate key \"type\" at byte 15")
  }

  @Test func invalidUTF8() {
    let bytes: [UInt8] = Array(#"{"type":"ping","id":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
    do {
      _ = try MessageCodec.decodeClientMessage(bytes)
      Issue.record("expected an error")
    } catch {
      #expect(error.code == .badRequest)
      #expect(error.message.contains("invalid UTF-8"))
    }
    // Overlong encoding and encoded surrogate are rejected too.
    for sequence: [UInt8] in [[0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]] {
      let frame = Array(#"{"type":"ping","id":"a"#.utf8) + sequence + Array(#""}"#.utf8)
      do {
        _ = try MessageCodec.decodeClientMessage(frame)
        Issue.record("expected an error for \(sequence)")
      } catch {
        #expect(error.message == "malformed JSON: invalid UTF-8 in string at byte 22", "\(sequence)")
      }
    }
    // Valid multi-byte characters pass, escaped or raw.
    let ok = Array(#"{"type":"ping","id":"é€😀\n"}"#.utf8)
    #expect((try? MessageCodec.decodeClientMessage(ok)) == ClientEnvelope(id: "é€😀\n", message: .ping(.init())))
  }

  @Test func nonObjectJSON() {
    for input in ["[]", "\"hello\"", "42", "null", "true", #"[{"type":"ping","id":"p"}]"#] {
      #expect(clientError(input) == ProtocolError(.badRequest, "message must be a JSON object"), "input \(input)")
    }
  }

  @Test func deepNestingIsRejectedNotCrashing() {
    let deep =
      "{\"type\":\"ping\",\"id\":\"p\",\"x\":" + String(repeating: "[", count: 20_000)
      + String(repeating: "]", count: 20_000) + "}"
    let error = clientError(deep)
    #expect(error?.code == .badRequest)
    #expect(error?.message.contains("nested deeper than 32 levels") == true)
    // 32 levels are fine (the message object itself is one).
    let ok =
      "{\"type\":\"ping\",\"id\":\"p\",\"x\":" + String(repeating: "[", count: 31) + String(repeating: "]", count: 31)
      + "}"
    #expect((try? MessageCodec.decodeClientMessage(ok)) == ClientEnvelope(id: "p", message: .ping(.init())))
  }

  @Test func oversizeFrame() {
    let padding = String(repeating: " ", count: Limits.maxMessageBytes)
    let error = clientError(#"{"type":"ping","id":"p"}"# + padding)
    #expect(error == ProtocolError(.tooLarge, "message exceeds 65536 bytes"))
  }

  // MARK: Errors: envelope

  @Test func missingType() {
    let error = clientError(#"{"id":"m1","callId":"c1"}"#)
    #expect(error == ProtocolError(.badRequest, "\"type\" is required", replyTo: "m1", callId: "c1"))
  }

  @Test func typeNotAString() {
    let error = clientError(#"{"type":7,"id":"m1"}"#)
    #expect(error == ProtocolError(.badRequest, "\"type\" must be a string", replyTo: "m1"))
  }

  @Test func unknownTypeKeepsIdForReplyTo() {
    let error = clientError(#"{"type":"foo","id":"m9","callId":"c1"}"#)
    #expect(error?.code == .unknownType)
    #expect(error?.message == #"unknown message type "foo""#)
    #expect(error?.replyTo == "m9")
    #expect(error?.callId == "c1")
    #expect(error?.messageType == "foo")
    #expect(error?.description == #"unknown-type: unknown message type "foo""#)
    // ...and the server turns it into an error reply.
    #expect(
      error?.serverMessage
        == .error(.init(replyTo: "m9", code: .unknownType, message: #"unknown message type "foo""#, callId: "c1")))
    // Server-side types are not client types.
    #expect(clientError(#"{"type":"welcome","id":"w"}"#)?.code == .unknownType)
    #expect(clientError(#"{"type":"call-ended","id":"w"}"#)?.code == .unknownType)
    #expect(clientError(#"{"type":"Ping","id":"w"}"#)?.code == .unknownType)
  }

  @Test func missingId() {
    for type in ClientMessageType.allCases where type.hasID {
      let error = clientError(#"{"type":"\#(type.rawValue)","callId":"c1"}"#)
      #expect(error?.code == .badRequest)
      #expect(error?.message == "\"id\" is required", "type \(type)")
      #expect(error?.replyTo == nil)
      #expect(error?.messageType == type.rawValue)
    }
  }

  @Test func badIds() {
    #expect(
      clientError(#"{"type":"ping","id":5}"#)
        == ProtocolError(.badRequest, "\"id\" must be a string", messageType: "ping"))
    #expect(
      clientError(#"{"type":"ping","id":""}"#)
        == ProtocolError(.badRequest, "\"id\" must not be empty", messageType: "ping"))
    let long = String(repeating: "x", count: 65)
    #expect(
      clientError(#"{"type":"ping","id":"\#(long)"}"#)
        == ProtocolError(.badRequest, "\"id\" must be at most 64 bytes", messageType: "ping"))
    // Length counts UTF-8 bytes: 22 four-byte characters are 88 bytes.
    let emoji = String(repeating: "😀", count: 22)
    #expect(clientError(#"{"type":"ping","id":"\#(emoji)"}"#)?.message == "\"id\" must be at most 64 bytes")
  }

  /// No store can keep a NUL faithfully (PostgreSQL's text refuses it): refused in any string.
  @Test func aNulInAnyStringIsRefused() {
    #expect(clientError(#"{"type":"ping","id":"a\u0000b"}"#)?.message == "\"id\" must not contain NUL")
    #expect(
      clientError(#"{"type":"invite","id":"m1","callId":"c1","to":"bob\u0000","video":false}"#)?.message
        == "\"to\" must not contain NUL")
    // Anywhere in a long string (past the few bytes a string keeps inline), first byte or last.
    let sdp = String(repeating: "a=x\\r\\n", count: 300)
    for body in [#"\u0000\#(sdp)"#, #"\#(sdp)\u0000"#] {
      #expect(
        clientError(#"{"type":"answer","id":"a1","callId":"c1","sdp":"\#(body)"}"#)?.message
          == "\"sdp\" must not contain NUL")
    }
    #expect(
      (try? MessageCodec.decodeClientMessage(#"{"type":"answer","id":"a1","callId":"c1","sdp":"\#(sdp)"}"#)) != nil)
  }

  // MARK: Errors: fields

  @Test func errorsAfterAValidIdCarryReplyToAndCallId() {
    let error = clientError(#"{"type":"answer","id":"a1","callId":"c1","sdp":42}"#)
    #expect(
      error
        == ProtocolError(.badRequest, "\"sdp\" must be a string", replyTo: "a1", callId: "c1", messageType: "answer"))
  }

  @Test func callIdErrors() {
    #expect(clientError(#"{"type":"hangup","id":"h"}"#)?.message == "\"callId\" is required")
    #expect(clientError(#"{"type":"hangup","id":"h","callId":null}"#)?.message == "\"callId\" is required")
    #expect(clientError(#"{"type":"hangup","id":"h","callId":12}"#)?.message == "\"callId\" must be a string")
    #expect(clientError(#"{"type":"hangup","id":"h","callId":""}"#)?.message == "\"callId\" must not be empty")
    let long = String(repeating: "a", count: 65)
    let error = clientError(#"{"type":"hangup","id":"h","callId":"\#(long)"}"#)
    #expect(error?.message == "\"callId\" must be 1 to 64 characters")
    #expect(error?.replyTo == "h")
    #expect(error?.callId == nil)
    #expect(
      clientError(#"{"type":"hangup","id":"h","callId":"a b"}"#)?.message
        == "\"callId\" may contain only A-Z, a-z, 0-9, '-', '_' and '.'")
    #expect(clientError(#"{"type":"hangup","id":"h","callId":"ca/ll"}"#)?.code == .badRequest)
  }

  @Test func helloErrors() {
    #expect(clientError(#"{"type":"hello","id":"h"}"#)?.message == "\"version\" is required")
    #expect(clientError(#"{"type":"hello","id":"h","version":"1"}"#)?.message == "\"version\" must be an integer")
    #expect(clientError(#"{"type":"hello","id":"h","version":1.5}"#)?.message == "\"version\" must be an integer")
    #expect(clientError(#"{"type":"hello","id":"h","version":true}"#)?.message == "\"version\" must be an integer")
    #expect(clientError(#"{"type":"hello","id":"h","version":1,"token":7}"#)?.message == "\"token\" must be a string")
    #expect(clientError(#"{"type":"hello","id":"h","version":1,"token":""}"#)?.message == "\"token\" must not be empty")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"resume":"s_1"}"#)?.message == "\"resume\" must be an object")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"resume":{"lastSeq":1}}"#)?.message
        == "\"resume.sessionId\" is required")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"resume":{"sessionId":"s","lastSeq":-1}}"#)?.message
        == "\"resume.lastSeq\" must be an integer from 0 to 9007199254740991")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"resume":{"sessionId":"s","lastSeq":"17"}}"#)?.message
        == "\"resume.lastSeq\" must be an integer")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"client":{"name":1}}"#)?.message
        == "\"client.name\" must be a string")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"features":"preconnect"}"#)?.message
        == "\"features\" must be an array of strings")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"features":["preconnect",7]}"#)?.message
        == "\"features\" must be a string")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"features":[""]}"#)?.message
        == "\"features\" must not be empty")
    let many = (0...16).map { "\"f\($0)\"" }.joined(separator: ",")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"features":[\#(many)]}"#)?.message
        == "\"features\" must have at most 16 entries")
    #expect(
      clientError(#"{"type":"hello","id":"h","version":1,"features":["\#(String(repeating: "f", count: 65))"]}"#)?
        .message == "\"features\" must be at most 64 bytes")
    let error = clientError(#"{"type":"hello","id":"h","version":1,"token":"\#(String(repeating: "t", count: 8193))"}"#)
    #expect(error?.message == "\"token\" must be at most 8192 bytes")
    #expect(error?.replyTo == "h")
  }

  @Test func ackErrors() {
    #expect(clientError(#"{"type":"ack"}"#) == ProtocolError(.badRequest, "\"seq\" is required", messageType: "ack"))
    #expect(clientError(#"{"type":"ack","seq":"5"}"#)?.message == "\"seq\" must be an integer")
    #expect(
      clientError(#"{"type":"ack","seq":-1}"#)?.message == "\"seq\" must be an integer from 0 to 9007199254740991")
    #expect(clientError(#"{"type":"ack","seq":9007199254740992}"#)?.code == .badRequest)
    #expect(clientError(#"{"type":"ack","seq":18446744073709551616}"#)?.code == .badRequest)
    // An ack never answers a request, so its errors have no replyTo even if it had an id.
    #expect(clientError(#"{"type":"ack","id":"x"}"#)?.replyTo == nil)
  }

  @Test func inviteErrors() {
    let base = #""type":"invite","id":"i","callId":"c1""#
    #expect(clientError("{\(base),\"video\":false}")?.message == "\"to\" is required")
    #expect(clientError("{\(base),\"to\":\"bob\"}")?.message == "\"video\" is required")
    #expect(clientError("{\(base),\"to\":\"bob\",\"video\":\"yes\"}")?.message == "\"video\" must be a boolean")
    #expect(clientError("{\(base),\"to\":\"bob\",\"video\":1}")?.message == "\"video\" must be a boolean")
    #expect(clientError("{\(base),\"to\":7,\"video\":false}")?.message == "\"to\" must be a string")
    #expect(clientError("{\(base),\"to\":\"\",\"video\":false}")?.message == "\"to\" must not be empty")
    let longUser = String(repeating: "u", count: 129)
    #expect(
      clientError("{\(base),\"to\":\"\(longUser)\",\"video\":false}")?.message == "\"to\" must be at most 128 bytes")
    #expect(
      clientError("{\(base),\"to\":\"bob\",\"video\":false,\"offer\":\"v=0\"}")?.message
        == "\"offer\" must be an object")
    #expect(
      clientError("{\(base),\"to\":\"bob\",\"video\":false,\"offer\":{}}")?.message == "\"offer.sdp\" is required")
    #expect(
      clientError("{\(base),\"to\":\"bob\",\"video\":false,\"callerName\":[]}")?.message
        == "\"callerName\" must be a string")
    let longName = String(repeating: "n", count: 129)
    #expect(
      clientError("{\(base),\"to\":\"bob\",\"video\":false,\"callerName\":\"\(longName)\"}")?.message
        == "\"callerName\" must be at most 128 bytes")
  }

  @Test func oversizeSDP() {
    let sdp = String(repeating: "a", count: Limits.maxSDPBytes + 1)
    let error = clientError(#"{"type":"offer","id":"o1","callId":"c1","sdp":"\#(sdp)"}"#)
    #expect(
      error
        == ProtocolError(.tooLarge, "\"sdp\" exceeds 32768 bytes", replyTo: "o1", callId: "c1", messageType: "offer"))
    #expect(error?.description == "too-large: \"sdp\" exceeds 32768 bytes")
    let nested = clientError(#"{"type":"accept","id":"a1","callId":"c1","answer":{"sdp":"\#(sdp)"}}"#)
    #expect(nested?.code == .tooLarge)
    #expect(nested?.message == "\"answer.sdp\" exceeds 32768 bytes")
    let invite = clientError(
      #"{"type":"invite","id":"i1","callId":"c1","to":"b","video":false,"offer":{"sdp":"\#(sdp)"}}"#)
    #expect(invite?.message == "\"offer.sdp\" exceeds 32768 bytes")
    #expect(clientError(#"{"type":"answer","id":"a","callId":"c1","sdp":""}"#)?.message == "\"sdp\" must not be empty")
  }

  @Test func candidateErrors() {
    let base = #""type":"candidate","id":"k1","callId":"c1""#
    #expect(clientError("{\(base)}")?.message == "\"candidate\" is required")
    #expect(clientError("{\(base),\"candidate\":\"candidate:1\"}")?.message == "\"candidate\" must be an object")
    let wrongType = clientError("{\(base),\"candidate\":{\"candidate\":1}}")
    #expect(
      wrongType
        == ProtocolError(
          .badRequest, "\"candidate.candidate\" must be a string", replyTo: "k1", callId: "c1", messageType: "candidate"
        ))
    #expect(wrongType?.description == "bad-request: \"candidate.candidate\" must be a string")
    #expect(clientError("{\(base),\"candidate\":{}}")?.message == "\"candidate.candidate\" is required")
    #expect(
      clientError("{\(base),\"candidate\":{\"candidate\":\"c\",\"sdpMid\":0}}")?.message
        == "\"candidate.sdpMid\" must be a string")
    #expect(
      clientError("{\(base),\"candidate\":{\"candidate\":\"c\",\"sdpMLineIndex\":\"0\"}}")?.message
        == "\"candidate.sdpMLineIndex\" must be an integer")
    #expect(
      clientError("{\(base),\"candidate\":{\"candidate\":\"c\",\"sdpMLineIndex\":-1}}")?.message
        == "\"candidate.sdpMLineIndex\" must be an integer from 0 to 65535")
    #expect(
      clientError("{\(base),\"candidate\":{\"candidate\":\"c\",\"usernameFragment\":false}}")?.message
        == "\"candidate.usernameFragment\" must be a string")
    let long = String(repeating: "x", count: Limits.maxCandidateBytes + 1)
    let tooLarge = clientError("{\(base),\"candidate\":{\"candidate\":\"\(long)\"}}")
    #expect(
      tooLarge
        == ProtocolError(
          .tooLarge, "\"candidate.candidate\" exceeds 1024 bytes", replyTo: "k1", callId: "c1", messageType: "candidate"
        ))
  }

  @Test func offerErrors() {
    #expect(
      clientError(#"{"type":"offer","id":"o","callId":"c1","sdp":"v=0","iceRestart":"true"}"#)?.message
        == "\"iceRestart\" must be a boolean")
    #expect(clientError(#"{"type":"offer","id":"o","callId":"c1"}"#)?.message == "\"sdp\" is required")
    #expect(
      clientError(#"{"type":"accept","id":"a","callId":"c1","answer":[]}"#)?.message == "\"answer\" must be an object")
  }

  @Test func protocolErrorConveniences() {
    let error = ProtocolError(.notFound, "no such call", replyTo: "m1", callId: "c1")
    #expect(error.serverMessage == .error(.init(replyTo: "m1", code: .notFound, message: "no such call", callId: "c1")))
    #expect(ErrorBody(error) == ErrorBody(code: .notFound, message: "no such call"))
  }
}
