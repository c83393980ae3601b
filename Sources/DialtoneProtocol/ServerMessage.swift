/// The `type` values of server → client messages.
import DialtoneJSON

public enum ServerMessageType: String, Sendable, Equatable, CaseIterable {
  case welcome
  case ack
  case error
  case invite
  case ringing
  case accept
  case offer
  case answer
  case candidate
  case endOfCandidates = "end-of-candidates"
  case iceRestartRequest = "ice-restart-request"
  case callEnded = "call-ended"
}

/// A message from the server to a client. The `seq` it travels with lives in `ServerEnvelope`.
public enum ServerMessage: Sendable, Equatable {
  /// Answer to `hello`.
  case welcome(Welcome)
  /// Success answer to a request (`replyTo` = its id).
  case ack(Ack)
  /// Failure answer to a request, or a failure not tied to one.
  case error(ErrorMessage)
  /// An incoming call (to every device of the callee).
  case invite(Invite)
  /// A callee device is alerting (to the caller).
  case ringing(PeerEvent)
  /// A callee device accepted (to the caller).
  case accept(Accept)
  /// An SDP offer from the caller (initial when the invite had none, or ICE restart).
  case offer(Offer)
  /// An SDP answer from the answering device.
  case answer(Answer)
  /// One trickled ICE candidate from the other side.
  case candidate(Candidate)
  /// The other side has no more candidates for the current ICE generation.
  case endOfCandidates(PeerEvent)
  /// The answerer asks the offerer (the receiver) to restart ICE.
  case iceRestartRequest(PeerEvent)
  /// The call ended (for this device).
  case callEnded(CallEnded)
  /// A message type this library does not know (sent by a newer server). Clients ignore it,
  /// but still acknowledge its seq. Only produced by lenient decoding.
  case unknown(Unknown)

  // MARK: Payloads

  /// `welcome`.
  public struct Welcome: Sendable, Hashable {
    /// The `hello`'s id.
    public var replyTo: String
    public var version: Int
    public var sessionId: String
    public var userId: String
    public var deviceId: String
    /// True when the session was resumed: every message with seq > `resume.lastSeq` follows.
    public var resumed: Bool
    /// True when a resume was asked for but could not be granted: this is a new session and
    /// the client must re-fetch the state of its calls with `get-call`.
    public var resync: Bool
    public var heartbeatSeconds: Int
    public var maxMessageBytes: Int
    public var iceServers: [IceServer]
    public var iceServersTtl: Int

    public init(
      replyTo: String, version: Int = ProtocolVersion.current, sessionId: String, userId: String, deviceId: String,
      resumed: Bool, resync: Bool, heartbeatSeconds: Int = ProtocolDefaults.heartbeatSeconds,
      maxMessageBytes: Int = Limits.maxMessageBytes, iceServers: [IceServer],
      iceServersTtl: Int = ProtocolDefaults.iceServersTTLSeconds
    ) {
      self.replyTo = replyTo
      self.version = version
      self.sessionId = sessionId
      self.userId = userId
      self.deviceId = deviceId
      self.resumed = resumed
      self.resync = resync
      self.heartbeatSeconds = heartbeatSeconds
      self.maxMessageBytes = maxMessageBytes
      self.iceServers = iceServers
      self.iceServersTtl = iceServersTtl
    }
  }

  /// `ack`: `{replyTo, callId?, call?}`.
  public struct Ack: Sendable, Hashable {
    public var replyTo: String
    /// Set when answering a call-related request.
    public var callId: CallID?
    /// Set when answering `get-call`.
    public var call: CallState?

    public init(replyTo: String, callId: CallID? = nil, call: CallState? = nil) {
      self.replyTo = replyTo
      self.callId = callId
      self.call = call
    }
  }

  /// `error`: `{replyTo?, code, message, callId?}`.
  public struct ErrorMessage: Sendable, Hashable {
    /// The id of the request that failed; absent when it could not be read.
    public var replyTo: String?
    public var code: ErrorCode
    /// Human-readable, for logs and developers; do not parse it.
    public var message: String
    public var callId: CallID?

    public init(replyTo: String? = nil, code: ErrorCode, message: String, callId: CallID? = nil) {
      self.replyTo = replyTo
      self.code = code
      self.message = message
      self.callId = callId
    }
  }

  /// `invite`: `{callId, from, video, offer?, createdAt}`.
  public struct Invite: Sendable, Hashable {
    public var callId: CallID
    /// The caller (its device that sent the invite).
    public var from: Peer
    public var video: Bool
    public var offer: SessionDescription?
    /// When the server accepted the invite, ms since the Unix epoch.
    public var createdAt: Int64

    public init(callId: CallID, from: Peer, video: Bool, offer: SessionDescription? = nil, createdAt: Int64) {
      self.callId = callId
      self.from = from
      self.video = video
      self.offer = offer
      self.createdAt = createdAt
    }
  }

  /// `{callId, from}`: ringing, end-of-candidates, ice-restart-request.
  public struct PeerEvent: Sendable, Hashable {
    public var callId: CallID
    public var from: Peer

    public init(callId: CallID, from: Peer) {
      self.callId = callId
      self.from = from
    }
  }

  /// `accept`: `{callId, from, answer?}`.
  public struct Accept: Sendable, Hashable {
    public var callId: CallID
    /// The callee device that accepted.
    public var from: Peer
    public var answer: SessionDescription?

    public init(callId: CallID, from: Peer, answer: SessionDescription? = nil) {
      self.callId = callId
      self.from = from
      self.answer = answer
    }
  }

  /// `offer`: `{callId, from, sdp, iceRestart?}`. `iceRestart` is written only when true.
  public struct Offer: Sendable, Hashable {
    public var callId: CallID
    public var from: Peer
    public var sdp: String
    public var iceRestart: Bool

    public init(callId: CallID, from: Peer, sdp: String, iceRestart: Bool = false) {
      self.callId = callId
      self.from = from
      self.sdp = sdp
      self.iceRestart = iceRestart
    }
  }

  /// `answer`: `{callId, from, sdp}`.
  public struct Answer: Sendable, Hashable {
    public var callId: CallID
    public var from: Peer
    public var sdp: String

    public init(callId: CallID, from: Peer, sdp: String) {
      self.callId = callId
      self.from = from
      self.sdp = sdp
    }
  }

  /// `candidate`: `{callId, from, candidate}`.
  public struct Candidate: Sendable, Hashable {
    public var callId: CallID
    public var from: Peer
    public var candidate: IceCandidate

    public init(callId: CallID, from: Peer, candidate: IceCandidate) {
      self.callId = callId
      self.from = from
      self.candidate = candidate
    }
  }

  /// `call-ended`: `{callId, reason, from?, replacedBy?}`.
  public struct CallEnded: Sendable, Hashable {
    public var callId: CallID
    public var reason: EndReason
    /// The device whose action ended the call (decline, hangup, cancel, accept elsewhere, ...);
    /// absent when the server ended it (missed, glare, connection-lost, failed).
    public var from: Peer?
    /// With reason `glare`: the id of the call that survives.
    public var replacedBy: CallID?

    public init(callId: CallID, reason: EndReason, from: Peer? = nil, replacedBy: CallID? = nil) {
      self.callId = callId
      self.reason = reason
      self.from = from
      self.replacedBy = replacedBy
    }
  }

  /// A message of a type this library does not know, kept whole.
  public struct Unknown: Sendable, Hashable {
    public var type: String
    /// The whole message object (including `type` and `seq`).
    public var json: JSONValue

    public init(type: String, json: JSONValue) {
      self.type = type
      self.json = json
    }
  }

  // MARK: Accessors

  /// The wire `type` string.
  public var typeName: String {
    if case .unknown(let m) = self { return m.type }
    return knownType?.rawValue ?? ""
  }

  /// The message type, nil for `.unknown`.
  public var knownType: ServerMessageType? {
    switch self {
    case .welcome: return .welcome
    case .ack: return .ack
    case .error: return .error
    case .invite: return .invite
    case .ringing: return .ringing
    case .accept: return .accept
    case .offer: return .offer
    case .answer: return .answer
    case .candidate: return .candidate
    case .endOfCandidates: return .endOfCandidates
    case .iceRestartRequest: return .iceRestartRequest
    case .callEnded: return .callEnded
    case .unknown: return nil
    }
  }

  /// The call the message is about, if any.
  public var callId: CallID? {
    switch self {
    case .welcome, .unknown: return nil
    case .ack(let m): return m.callId
    case .error(let m): return m.callId
    case .invite(let m): return m.callId
    case .ringing(let m), .endOfCandidates(let m), .iceRestartRequest(let m): return m.callId
    case .accept(let m): return m.callId
    case .offer(let m): return m.callId
    case .answer(let m): return m.callId
    case .candidate(let m): return m.callId
    case .callEnded(let m): return m.callId
    }
  }

  /// The request id this message answers (welcome, ack, error).
  public var replyTo: String? {
    switch self {
    case .welcome(let m): return m.replyTo
    case .ack(let m): return m.replyTo
    case .error(let m): return m.replyTo
    default: return nil
    }
  }

  // MARK: Encoding

  /// The JSON object of this message, with `seq` when given.
  public func json(seq: UInt64?) -> JSONValue {
    var o = ObjectBuilder()
    o.set("seq", seq)
    switch self {
    case .welcome(let m):
      o.set("replyTo", m.replyTo)
      o.set("version", m.version)
      o.set("sessionId", m.sessionId)
      o.set("userId", m.userId)
      o.set("deviceId", m.deviceId)
      o.set("resumed", m.resumed)
      o.set("resync", m.resync)
      o.set("heartbeatSeconds", m.heartbeatSeconds)
      o.set("maxMessageBytes", m.maxMessageBytes)
      o.set("iceServers", m.iceServers)
      o.set("iceServersTtl", m.iceServersTtl)
    case .ack(let m):
      o.set("replyTo", m.replyTo)
      o.set("callId", m.callId)
      o.set("call", m.call)
    case .error(let m):
      o.set("replyTo", m.replyTo)
      o.set("code", m.code.rawValue)
      o.set("message", m.message)
      o.set("callId", m.callId)
    case .invite(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
      o.set("video", m.video)
      o.set("offer", m.offer)
      o.set("createdAt", m.createdAt)
    case .ringing(let m), .endOfCandidates(let m), .iceRestartRequest(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
    case .accept(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
      o.set("answer", m.answer)
    case .offer(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
      o.set("sdp", m.sdp)
      if m.iceRestart { o.set("iceRestart", true) }
    case .answer(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
      o.set("sdp", m.sdp)
    case .candidate(let m):
      o.set("callId", m.callId)
      o.set("from", m.from)
      o.set("candidate", m.candidate)
    case .callEnded(let m):
      o.set("callId", m.callId)
      o.set("reason", m.reason.rawValue)
      o.set("from", m.from)
      o.set("replacedBy", m.replacedBy)
    case .unknown(let m):
      if case .object(let members) = m.json {
        for (key, value) in members where key != "seq" { o.members[key] = value }
      }
    }
    o.set("type", typeName)
    return o.json
  }
}

/// A server message with the `seq` it travels with (nil for `welcome` and for errors sent
/// before the session exists).
public struct ServerEnvelope: WireCodable {
  public var seq: UInt64?
  public var message: ServerMessage

  public init(seq: UInt64?, message: ServerMessage) {
    self.seq = seq
    self.message = message
  }

  public var json: JSONValue { message.json(seq: seq) }

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    guard case .object(let object) = json else {
      throw ProtocolError(.badRequest, "message must be a JSON object")
    }
    var contextSeq: UInt64?
    if let value = object["seq"], let number = value.integerValue, number >= 0, UInt64(number) <= Limits.maxSeq {
      contextSeq = UInt64(number)
    }
    var contextCallId: CallID?
    if case .string(let callId)? = object["callId"] { contextCallId = callId }
    var typeName: String?
    do throws(ProtocolError) {
      guard let typeValue = object["type"], typeValue != .null else {
        throw ProtocolError(.badRequest, "\"type\" is required")
      }
      guard case .string(let name) = typeValue else {
        throw ProtocolError(.badRequest, "\"type\" must be a string")
      }
      typeName = name
      let r = try FieldReader(json, path: "", options: options)
      let seq = try r.optionalSeq("seq")
      guard let type = ServerMessageType(rawValue: name) else {
        if options.enforceLimits {
          throw ProtocolError(.unknownType, "unknown message type \(ClientMessage.quote(name))")
        }
        self.init(seq: seq, message: .unknown(ServerMessage.Unknown(type: name, json: json)))
        return
      }
      self.init(seq: seq, message: try Self.decodeBody(type: type, r))
    } catch {
      var error = error
      error.seq = contextSeq
      error.callId = contextCallId
      error.messageType = typeName
      throw error
    }
  }

  private static func decodeBody(type: ServerMessageType, _ r: FieldReader) throws(ProtocolError) -> ServerMessage {
    switch type {
    case .welcome:
      return .welcome(
        ServerMessage.Welcome(
          replyTo: try r.string("replyTo"),
          version: Int(try r.int("version", in: Int64(Int32.min)...Int64(Int32.max))),
          sessionId: try r.string("sessionId", maxBytes: Limits.maxSessionIDBytes),
          userId: try r.userId("userId"),
          deviceId: try r.deviceId("deviceId"),
          resumed: try r.bool("resumed"),
          resync: try r.bool("resync"),
          heartbeatSeconds: Int(try r.int("heartbeatSeconds", in: 1...Int64(Int32.max))),
          maxMessageBytes: Int(try r.int("maxMessageBytes", in: 1...Int64(Int32.max))),
          iceServers: try r.array("iceServers", of: IceServer.self),
          iceServersTtl: Int(try r.int("iceServersTtl", in: 0...Int64(Int32.max)))))
    case .ack:
      return .ack(
        ServerMessage.Ack(
          replyTo: try r.string("replyTo"), callId: try r.optionalCallId("callId"),
          call: try r.optional("call", CallState.self)))
    case .error:
      let rawCode = try r.string("code")
      let code: ErrorCode
      if let known = ErrorCode(rawValue: rawCode) {
        code = known
      } else if r.enforceLimits {
        throw ProtocolError(.badRequest, "\"code\" is not a known error code")
      } else {
        code = .internal
      }
      return .error(
        ServerMessage.ErrorMessage(
          replyTo: try r.optionalString("replyTo", minBytes: 1), code: code,
          message: try r.string("message", minBytes: 0), callId: try r.optionalCallId("callId")))
    case .invite:
      return .invite(
        ServerMessage.Invite(
          callId: try r.callId(), from: try r.required("from", Peer.self), video: try r.bool("video"),
          offer: try r.optional("offer", SessionDescription.self), createdAt: try r.timestamp("createdAt")))
    case .ringing:
      return .ringing(ServerMessage.PeerEvent(callId: try r.callId(), from: try r.required("from", Peer.self)))
    case .endOfCandidates:
      return .endOfCandidates(ServerMessage.PeerEvent(callId: try r.callId(), from: try r.required("from", Peer.self)))
    case .iceRestartRequest:
      return .iceRestartRequest(
        ServerMessage.PeerEvent(callId: try r.callId(), from: try r.required("from", Peer.self)))
    case .accept:
      return .accept(
        ServerMessage.Accept(
          callId: try r.callId(), from: try r.required("from", Peer.self),
          answer: try r.optional("answer", SessionDescription.self)))
    case .offer:
      return .offer(
        ServerMessage.Offer(
          callId: try r.callId(), from: try r.required("from", Peer.self), sdp: try r.sdp("sdp"),
          iceRestart: try r.optionalBool("iceRestart") ?? false))
    case .answer:
      return .answer(
        ServerMessage.Answer(callId: try r.callId(), from: try r.required("from", Peer.self), sdp: try r.sdp("sdp")))
    case .candidate:
      return .candidate(
        ServerMessage.Candidate(
          callId: try r.callId(), from: try r.required("from", Peer.self),
          candidate: try r.required("candidate", IceCandidate.self)))
    case .callEnded:
      return .callEnded(
        ServerMessage.CallEnded(
          callId: try r.callId(), reason: try r.endReason("reason"), from: try r.optional("from", Peer.self),
          replacedBy: try r.optionalCallId("replacedBy")))
    }
  }
}
