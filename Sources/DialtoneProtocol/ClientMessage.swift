/// The `type` values of client → server messages.
import DialtoneJSON

public enum ClientMessageType: String, Sendable, Equatable, CaseIterable {
  case hello
  case ack
  case ping
  case invite
  case ringing
  case accept
  case decline
  case busy
  case cancel
  case hangup
  case offer
  case answer
  case candidate
  case endOfCandidates = "end-of-candidates"
  case iceRestartRequest = "ice-restart-request"
  case getCall = "get-call"

  /// Whether messages of this type carry an `id` (all but `ack`).
  public var hasID: Bool { self != .ack }
}

/// A message from a client to the server.
public enum ClientMessage: WireCodable {
  /// First message on every socket.
  case hello(Hello)
  /// Cumulative acknowledgement of server messages.
  case ack(Ack)
  /// Application-level keepalive; answered with `ack`.
  case ping(Ping)
  /// Start a call.
  case invite(Invite)
  /// A callee device is alerting its user.
  case ringing(CallAction)
  /// A callee device accepts the call.
  case accept(Accept)
  /// A callee device declines the call (for all of the callee's devices).
  case decline(CallAction)
  /// A callee device cannot take the call (e.g. it is in a cellular call).
  case busy(CallAction)
  /// The caller gives up before the call is accepted.
  case cancel(CallAction)
  /// A participant ends an accepted call.
  case hangup(CallAction)
  /// An SDP offer (the caller only), including ICE restarts.
  case offer(Offer)
  /// An SDP answer (the answering callee device only).
  case answer(Answer)
  /// One trickled ICE candidate.
  case candidate(Candidate)
  /// The sender has no more candidates for the current ICE generation.
  case endOfCandidates(CallAction)
  /// The answerer asks the offerer to restart ICE.
  case iceRestartRequest(CallAction)
  /// Fetch a call's state; answered with `ack` carrying `call`.
  case getCall(CallAction)

  // MARK: Payloads

  /// `hello`: `{id, version, token?, resume?, client?}`.
  public struct Hello: Sendable, Hashable {
    public var id: String
    public var version: Int
    /// The JWT, when it is not sent in the `Authorization` header of the upgrade request.
    public var token: String?
    public var resume: Resume?
    public var client: ClientInfo?

    public init(
      id: String, version: Int = ProtocolVersion.current, token: String? = nil, resume: Resume? = nil,
      client: ClientInfo? = nil
    ) {
      self.id = id
      self.version = version
      self.token = token
      self.resume = resume
      self.client = client
    }
  }

  /// `hello.resume`: `{sessionId, lastSeq}`.
  public struct Resume: WireCodable, Hashable {
    public var sessionId: String
    /// The highest seq the client has received and processed (0 if none).
    public var lastSeq: UInt64

    public init(sessionId: String, lastSeq: UInt64) {
      self.sessionId = sessionId
      self.lastSeq = lastSeq
    }

    public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
      let r = try FieldReader(json, path: path, options: options)
      sessionId = try r.string("sessionId", maxBytes: Limits.maxSessionIDBytes)
      lastSeq = try r.seq("lastSeq")
    }

    public var json: JSONValue {
      var o = ObjectBuilder()
      o.set("sessionId", sessionId)
      o.set("lastSeq", lastSeq)
      return o.json
    }
  }

  /// `hello.client`: `{name?, version?}`, for logs and metrics.
  public struct ClientInfo: WireCodable, Hashable {
    public var name: String?
    public var version: String?

    public init(name: String? = nil, version: String? = nil) {
      self.name = name
      self.version = version
    }

    public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
      let r = try FieldReader(json, path: path, options: options)
      name = try r.optionalString("name", maxBytes: Limits.maxClientInfoBytes)
      version = try r.optionalString("version", maxBytes: Limits.maxClientInfoBytes)
    }

    public var json: JSONValue {
      var o = ObjectBuilder()
      o.set("name", name)
      o.set("version", version)
      return o.json
    }
  }

  /// `ack`: `{seq}`. The only client message without `id`.
  public struct Ack: Sendable, Hashable {
    public var seq: UInt64

    public init(seq: UInt64) {
      self.seq = seq
    }
  }

  /// `ping`: `{id}`.
  public struct Ping: Sendable, Hashable {
    public var id: String

    public init(id: String) {
      self.id = id
    }
  }

  /// `invite`: `{id, callId, to, video, offer?, callerName?}`.
  public struct Invite: Sendable, Hashable {
    public var id: String
    public var callId: CallID
    /// The callee's user id.
    public var to: String
    public var video: Bool
    public var offer: SessionDescription?
    /// Overrides the token's `name` claim as the caller's display name for this call.
    public var callerName: String?

    public init(
      id: String, callId: CallID, to: String, video: Bool, offer: SessionDescription? = nil, callerName: String? = nil
    ) {
      self.id = id
      self.callId = callId
      self.to = to
      self.video = video
      self.offer = offer
      self.callerName = callerName
    }
  }

  /// `{id, callId}`: ringing, decline, busy, cancel, hangup, end-of-candidates,
  /// ice-restart-request, get-call.
  public struct CallAction: Sendable, Hashable {
    public var id: String
    public var callId: CallID

    public init(id: String, callId: CallID) {
      self.id = id
      self.callId = callId
    }
  }

  /// `accept`: `{id, callId, answer?}`.
  public struct Accept: Sendable, Hashable {
    public var id: String
    public var callId: CallID
    /// The answer to the offer carried by the invite; absent when the invite had no offer.
    public var answer: SessionDescription?

    public init(id: String, callId: CallID, answer: SessionDescription? = nil) {
      self.id = id
      self.callId = callId
      self.answer = answer
    }
  }

  /// `offer`: `{id, callId, sdp, iceRestart?}`. `iceRestart` is written only when true.
  public struct Offer: Sendable, Hashable {
    public var id: String
    public var callId: CallID
    public var sdp: String
    public var iceRestart: Bool

    public init(id: String, callId: CallID, sdp: String, iceRestart: Bool = false) {
      self.id = id
      self.callId = callId
      self.sdp = sdp
      self.iceRestart = iceRestart
    }
  }

  /// `answer`: `{id, callId, sdp}`.
  public struct Answer: Sendable, Hashable {
    public var id: String
    public var callId: CallID
    public var sdp: String

    public init(id: String, callId: CallID, sdp: String) {
      self.id = id
      self.callId = callId
      self.sdp = sdp
    }
  }

  /// `candidate`: `{id, callId, candidate: {candidate, sdpMid?, sdpMLineIndex?, usernameFragment?}}`.
  public struct Candidate: Sendable, Hashable {
    public var id: String
    public var callId: CallID
    public var candidate: IceCandidate

    public init(id: String, callId: CallID, candidate: IceCandidate) {
      self.id = id
      self.callId = callId
      self.candidate = candidate
    }
  }

  // MARK: Accessors

  public var type: ClientMessageType {
    switch self {
    case .hello: return .hello
    case .ack: return .ack
    case .ping: return .ping
    case .invite: return .invite
    case .ringing: return .ringing
    case .accept: return .accept
    case .decline: return .decline
    case .busy: return .busy
    case .cancel: return .cancel
    case .hangup: return .hangup
    case .offer: return .offer
    case .answer: return .answer
    case .candidate: return .candidate
    case .endOfCandidates: return .endOfCandidates
    case .iceRestartRequest: return .iceRestartRequest
    case .getCall: return .getCall
    }
  }

  /// The message's `id` (nil only for `ack`).
  public var id: String? {
    switch self {
    case .hello(let m): return m.id
    case .ack: return nil
    case .ping(let m): return m.id
    case .invite(let m): return m.id
    case .accept(let m): return m.id
    case .offer(let m): return m.id
    case .answer(let m): return m.id
    case .candidate(let m): return m.id
    case .ringing(let m), .decline(let m), .busy(let m), .cancel(let m), .hangup(let m),
      .endOfCandidates(let m), .iceRestartRequest(let m), .getCall(let m):
      return m.id
    }
  }

  /// The call the message is about, if any.
  public var callId: CallID? {
    switch self {
    case .hello, .ack, .ping: return nil
    case .invite(let m): return m.callId
    case .accept(let m): return m.callId
    case .offer(let m): return m.callId
    case .answer(let m): return m.callId
    case .candidate(let m): return m.callId
    case .ringing(let m), .decline(let m), .busy(let m), .cancel(let m), .hangup(let m),
      .endOfCandidates(let m), .iceRestartRequest(let m), .getCall(let m):
      return m.callId
    }
  }

  // MARK: Decoding

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    guard case .object(let object) = json else {
      throw ProtocolError(.badRequest, "message must be a JSON object")
    }
    // Context for error replies, read leniently before anything can fail.
    var replyTo: String?
    if case .string(let id)? = object["id"], (1...Limits.maxMessageIDBytes).contains(id.utf8.count) {
      replyTo = id
    }
    var contextCallId: CallID?
    if case .string(let callId)? = object["callId"], CallIDRules.isValid(callId) {
      contextCallId = callId
    }
    var typeName: String?
    do throws(ProtocolError) {
      guard let typeValue = object["type"], typeValue != .null else {
        throw ProtocolError(.badRequest, "\"type\" is required")
      }
      guard case .string(let name) = typeValue else {
        throw ProtocolError(.badRequest, "\"type\" must be a string")
      }
      typeName = name
      guard let type = ClientMessageType(rawValue: name) else {
        throw ProtocolError(.unknownType, "unknown message type \(Self.quote(name))")
      }
      let r = try FieldReader(json, path: "", options: options)
      if type == .ack {
        replyTo = nil
        self = .ack(Ack(seq: try r.seq("seq")))
        return
      }
      let id = try r.string("id", maxBytes: Limits.maxMessageIDBytes)
      self = try Self.decodeBody(type: type, id: id, r)
    } catch {
      var error = error
      error.replyTo = replyTo
      error.callId = contextCallId
      error.messageType = typeName
      throw error
    }
  }

  private static func decodeBody(type: ClientMessageType, id: String, _ r: FieldReader) throws(ProtocolError)
    -> ClientMessage
  {
    switch type {
    case .hello:
      return .hello(
        Hello(
          id: id,
          version: Int(try r.int("version", in: Int64(Int32.min)...Int64(Int32.max))),
          token: try r.optionalString("token", minBytes: 1, maxBytes: Limits.maxTokenBytes),
          resume: try r.optional("resume", Resume.self),
          client: try r.optional("client", ClientInfo.self)))
    case .ack:
      return .ack(Ack(seq: try r.seq("seq")))
    case .ping:
      return .ping(Ping(id: id))
    case .invite:
      return .invite(
        Invite(
          id: id, callId: try r.callId(), to: try r.userId("to"), video: try r.bool("video"),
          offer: try r.optional("offer", SessionDescription.self), callerName: try r.optionalName("callerName")))
    case .accept:
      return .accept(Accept(id: id, callId: try r.callId(), answer: try r.optional("answer", SessionDescription.self)))
    case .offer:
      return .offer(
        Offer(
          id: id, callId: try r.callId(), sdp: try r.sdp("sdp"), iceRestart: try r.optionalBool("iceRestart") ?? false))
    case .answer:
      return .answer(Answer(id: id, callId: try r.callId(), sdp: try r.sdp("sdp")))
    case .candidate:
      return .candidate(
        Candidate(id: id, callId: try r.callId(), candidate: try r.required("candidate", IceCandidate.self)))
    case .ringing: return .ringing(CallAction(id: id, callId: try r.callId()))
    case .decline: return .decline(CallAction(id: id, callId: try r.callId()))
    case .busy: return .busy(CallAction(id: id, callId: try r.callId()))
    case .cancel: return .cancel(CallAction(id: id, callId: try r.callId()))
    case .hangup: return .hangup(CallAction(id: id, callId: try r.callId()))
    case .endOfCandidates: return .endOfCandidates(CallAction(id: id, callId: try r.callId()))
    case .iceRestartRequest: return .iceRestartRequest(CallAction(id: id, callId: try r.callId()))
    case .getCall: return .getCall(CallAction(id: id, callId: try r.callId()))
    }
  }

  /// A type name quoted for an error message, shortened if absurdly long.
  static func quote(_ name: String) -> String {
    let shown = name.utf8.count > 64 ? String(name.prefix(64)) + "…" : name
    return JSONValue.string(shown).serializedString
  }

  // MARK: Encoding

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("type", type.rawValue)
    switch self {
    case .hello(let m):
      o.set("id", m.id)
      o.set("version", m.version)
      o.set("token", m.token)
      o.set("resume", m.resume)
      o.set("client", m.client)
    case .ack(let m):
      o.set("seq", m.seq)
    case .ping(let m):
      o.set("id", m.id)
    case .invite(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
      o.set("to", m.to)
      o.set("video", m.video)
      o.set("offer", m.offer)
      o.set("callerName", m.callerName)
    case .accept(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
      o.set("answer", m.answer)
    case .offer(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
      o.set("sdp", m.sdp)
      if m.iceRestart { o.set("iceRestart", true) }
    case .answer(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
      o.set("sdp", m.sdp)
    case .candidate(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
      o.set("candidate", m.candidate)
    case .ringing(let m), .decline(let m), .busy(let m), .cancel(let m), .hangup(let m),
      .endOfCandidates(let m), .iceRestartRequest(let m), .getCall(let m):
      o.set("id", m.id)
      o.set("callId", m.callId)
    }
    return o.json
  }
}
