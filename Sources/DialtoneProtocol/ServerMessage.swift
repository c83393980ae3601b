import DialtoneJSON

/// The `type` values of server → client messages.
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
  case mediaState = "media-state"
  case hold
  case groupInvite = "group-invite"
  case groupUpdate = "group-update"
  case groupMedia = "group-media"
  case groupOffer = "group-offer"
  case groupAnswer = "group-answer"
  case groupCandidate = "group-candidate"
  case groupStreamEnded = "group-stream-ended"
  case groupEnded = "group-ended"

  /// How a client treats a message of this type, decided here once per type: the switch has no
  /// `default`, so a new type cannot be added without saying. `ServerMessage.routed` hands the
  /// message to its desk at its payload's type.
  public var rules: ServerMessageRules {
    switch self {
    case .welcome, .ack, .error: ServerMessageRules(desk: .session)
    case .invite, .ringing, .accept, .offer, .answer, .candidate, .endOfCandidates, .iceRestartRequest, .callEnded,
      .mediaState, .hold:
      ServerMessageRules(desk: .oneToOne)
    case .groupInvite, .groupUpdate, .groupMedia, .groupOffer, .groupAnswer, .groupCandidate, .groupStreamEnded,
      .groupEnded:
      ServerMessageRules(desk: .group)
    }
  }
}

/// How a client treats a server message type (`ServerMessageType.rules`).
public struct ServerMessageRules: Sendable, Equatable {
  public enum Desk: Sendable, Equatable {
    /// The session's own business: `welcome`, and the answers to requests (`ack`, `error`).
    case session
    /// A 1:1 call's: for the call's engine (an `invite` makes one).
    case oneToOne
    /// A group call's: for the group call (a `group-invite` makes one).
    case group
  }

  public var desk: Desk

  public init(desk: Desk) {
    self.desk = desk
  }
}

/// A server message's payload: its fields without the envelope (`type`, `seq`).
public protocol ServerMessageBody: WireCodable {
  /// The call the message is about, if any.
  var relatedCall: CallID? { get }
}

extension ServerMessageBody {
  public var relatedCall: CallID? { nil }
}

/// A payload about one call.
public protocol ServerCallMessageBody: ServerMessageBody {
  var callId: CallID { get }
}

extension ServerCallMessageBody {
  public var relatedCall: CallID? { callId }
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
  case ringing(Ringing)
  /// A callee device accepted (to the caller).
  case accept(Accept)
  /// An SDP offer from the caller (initial when the invite had none, or ICE restart).
  case offer(Offer)
  /// An SDP answer from the answering device.
  case answer(Answer)
  /// One trickled ICE candidate from the other side.
  case candidate(Candidate)
  /// The other side has no more candidates for the current ICE generation.
  case endOfCandidates(EndOfCandidates)
  /// The answerer asks the offerer (the receiver) to restart ICE.
  case iceRestartRequest(PeerEvent)
  /// The call ended (for this device).
  case callEnded(CallEnded)
  /// The other side's camera went off or on.
  case mediaState(MediaState)
  /// The other side put the call on hold, or took it off hold.
  case hold(Hold)
  /// A group call rings this member's device. Out of line: the largest payload but the ack's
  /// (see `OutOfLine`).
  indirect case groupInvite(GroupInvite)
  /// A group call's participant list changed (to every member's devices).
  case groupUpdate(GroupUpdate)
  /// How the joined device reaches the group call's media.
  case groupMedia(GroupMedia)
  /// The SFU offers a stream (another participant's media).
  case groupOffer(GroupDescription)
  /// The SFU answers the device's publisher offer.
  case groupAnswer(GroupDescription)
  /// One of the SFU's candidates for a stream.
  case groupCandidate(GroupCandidate)
  /// An offered stream is gone.
  case groupStreamEnded(GroupStreamEnded)
  /// The group call is over for this device.
  case groupEnded(GroupEnded)
  /// A message type this library does not know (sent by a newer server). Clients ignore it,
  /// but still acknowledge its seq. Only produced by lenient decoding.
  case unknown(Unknown)

  // MARK: Payloads

  /// `welcome`.
  public struct Welcome: ServerMessageBody, Hashable {
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
    /// The protocol extensions of the client's `hello` that this server implements.
    public var features: [String] = []

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

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(replyTo: "", sessionId: "", userId: "", deviceId: "", resumed: false, resync: false, iceServers: [])
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("deviceId", &deviceId, .deviceId)
      try c.names("features", &features, .feature)
      try c.integer("heartbeatSeconds", &heartbeatSeconds, 1...Int64(Int32.max))
      try c.objects("iceServers", &iceServers)
      try c.integer("iceServersTtl", &iceServersTtl, 0...Int64(Int32.max))
      try c.integer("maxMessageBytes", &maxMessageBytes, 1...Int64(Int32.max))
      try c.string("replyTo", &replyTo, .nonEmpty)
      try c.bool("resumed", &resumed)
      try c.bool("resync", &resync)
      try c.string("sessionId", &sessionId, .sessionId)
      try c.string("userId", &userId, .userId)
      try c.integer("version", &version, Int64(Int32.min)...Int64(Int32.max))
    }
  }

  /// `ack`: `{replyTo, callId?, call?}`.
  public struct Ack: ServerMessageBody, Hashable {
    public var replyTo: String
    /// Set when answering a call-related request.
    public var callId: CallID?
    /// Set when answering `get-call`.
    public var call: CallState? {
      get { storedCall?.value }
      set { storedCall = newValue.map(OutOfLine.init) }
    }
    /// Set when answering `group-create`, `group-join`, `room-join` and `get-group`.
    public var group: GroupCallState? {
      get { storedGroup?.value }
      set { storedGroup = newValue.map(OutOfLine.init) }
    }
    private var storedCall: OutOfLine<CallState>?
    private var storedGroup: OutOfLine<GroupCallState>?

    public init(replyTo: String, callId: CallID? = nil, call: CallState?, group: GroupCallState? = nil) {
      self.replyTo = replyTo
      self.callId = callId
      storedCall = call.map(OutOfLine.init)
      storedGroup = group.map(OutOfLine.init)
    }

    public init(replyTo: String, callId: CallID? = nil, group: GroupCallState) {
      self.init(replyTo: replyTo, callId: callId, call: nil, group: group)
    }

    /// A plain ack, what nearly every request gets: built without the optional states'
    /// temporaries (each `nil` destroyed through `Optional`'s generic value witness, ~65
    /// instructions, five a relayed candidate).
    public init(replyTo: String, callId: CallID? = nil) {
      self.replyTo = replyTo
      self.callId = callId
      storedCall = nil
      storedGroup = nil
    }

    /// Neither a call's nor a group's state: only the request answered, and its call.
    public var isPlain: Bool { storedCall == nil && storedGroup == nil }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(replyTo: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.object("call", &call)
      try c.string("callId", &callId, .callId)
      try c.object("group", &group)
      try c.string("replyTo", &replyTo, .nonEmpty)
    }
  }

  /// `error`: `{replyTo?, code, message, callId?}`.
  public struct ErrorMessage: ServerMessageBody, Hashable {
    /// The id of the request that failed; absent when it could not be read.
    public var replyTo: String?
    public var code: ErrorCode
    /// Human-readable, for logs and developers; do not parse it.
    public var message: String
    public var callId: CallID?
    /// With `rate-limited`: how long to wait before sending again, in milliseconds.
    public var retryAfterMs: Int64?

    public init(
      replyTo: String? = nil, code: ErrorCode, message: String, callId: CallID? = nil, retryAfterMs: Int64? = nil
    ) {
      self.replyTo = replyTo
      self.code = code
      self.message = message
      self.callId = callId
      self.retryAfterMs = retryAfterMs
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(code: .internal, message: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.enumeration("code", &code)
      try c.string("message", &message, .any)
      try c.string("replyTo", &replyTo, .nonEmpty)
      try c.integer("retryAfterMs", &retryAfterMs, 0...Int64.max)
    }
  }

  /// `invite`: `{callId, from, video, offer?, createdAt}`.
  public struct Invite: ServerCallMessageBody, Hashable {
    public var callId: CallID
    /// The caller (its device that sent the invite).
    public var from: Peer
    public var video: Bool
    public var offer: SessionDescription?
    /// When the server accepted the invite, ms since the Unix epoch.
    public var createdAt: Int64
    /// The caller makes a pre-connected leg for each callee device that asks (9b).
    public var preconnect: Bool

    public init(
      callId: CallID, from: Peer, video: Bool, offer: SessionDescription? = nil, createdAt: Int64,
      preconnect: Bool = false
    ) {
      self.callId = callId
      self.from = from
      self.video = video
      self.offer = offer
      self.createdAt = createdAt
      self.preconnect = preconnect
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), video: false, createdAt: 0)
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.integer("createdAt", &createdAt, 0...Int64.max)
      try c.object("from", &from)
      try c.object("offer", &offer)
      try c.flag("preconnect", &preconnect)
      try c.bool("video", &video)
    }
  }

  /// `ringing`: `{callId, from, preconnect?}`. `preconnect` is written only when true.
  public struct Ringing: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    /// The ringing device asks for a pre-connected leg (9b).
    public var preconnect: Bool

    public init(callId: CallID, from: Peer, preconnect: Bool = false) {
      self.callId = callId
      self.from = from
      self.preconnect = preconnect
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", from: Peer(userId: "", deviceId: "")) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.flag("preconnect", &preconnect)
    }
  }

  /// `end-of-candidates`: `{callId, from, leg?}`.
  public struct EndOfCandidates: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    /// For this device's pre-connected leg (9b).
    public var leg: Bool

    public init(callId: CallID, from: Peer, leg: Bool = false) {
      self.callId = callId
      self.from = from
      self.leg = leg
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", from: Peer(userId: "", deviceId: "")) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.flag("leg", &leg)
    }
  }

  /// `{callId, from}`: ice-restart-request.
  public struct PeerEvent: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer

    public init(callId: CallID, from: Peer) {
      self.callId = callId
      self.from = from
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", from: Peer(userId: "", deviceId: "")) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
    }
  }

  /// `accept`: `{callId, from, answer?}`.
  public struct Accept: ServerCallMessageBody, Hashable {
    public var callId: CallID
    /// The callee device that accepted.
    public var from: Peer
    public var answer: SessionDescription?
    /// The device accepted on its pre-connected leg (9b): its answer came before, on that leg.
    public var preconnected: Bool

    public init(callId: CallID, from: Peer, answer: SessionDescription? = nil, preconnected: Bool = false) {
      self.callId = callId
      self.from = from
      self.answer = answer
      self.preconnected = preconnected
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", from: Peer(userId: "", deviceId: "")) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.object("answer", &answer)
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.flag("preconnected", &preconnected)
    }
  }

  /// `offer`: `{callId, from, sdp, iceRestart?, leg?}`. The flags are written only when true.
  public struct Offer: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    public var sdp: String
    public var iceRestart: Bool
    /// Sent to this device alone, for its pre-connected leg (9b): `toDevice` named it.
    public var leg: Bool

    public init(callId: CallID, from: Peer, sdp: String, iceRestart: Bool = false, leg: Bool = false) {
      self.callId = callId
      self.from = from
      self.sdp = sdp
      self.iceRestart = iceRestart
      self.leg = leg
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), sdp: "")
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.flag("iceRestart", &iceRestart)
      try c.flag("leg", &leg)
      try c.string("sdp", &sdp, .sdp)
    }
  }

  /// `answer`: `{callId, from, sdp}`.
  public struct Answer: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    public var sdp: String

    public init(callId: CallID, from: Peer, sdp: String) {
      self.callId = callId
      self.from = from
      self.sdp = sdp
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), sdp: "")
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.string("sdp", &sdp, .sdp)
    }
  }

  /// `candidate`: `{callId, from, candidate}`.
  public struct Candidate: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    public var candidate: IceCandidate
    /// For this device's pre-connected leg (9b).
    public var leg: Bool

    public init(callId: CallID, from: Peer, candidate: IceCandidate, leg: Bool = false) {
      self.callId = callId
      self.from = from
      self.candidate = candidate
      self.leg = leg
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), candidate: IceCandidate(candidate: ""))
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("candidate", &candidate)
      try c.object("from", &from)
      try c.flag("leg", &leg)
    }
  }

  /// `media-state`: `{callId, from, camera}`.
  public struct MediaState: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    public var camera: Bool

    public init(callId: CallID, from: Peer, camera: Bool) {
      self.callId = callId
      self.from = from
      self.camera = camera
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), camera: false)
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.bool("camera", &camera)
      try c.object("from", &from)
    }
  }

  /// `hold`: `{callId, from, onHold}`.
  public struct Hold: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var from: Peer
    /// Whether the other side holds the call now.
    public var onHold: Bool

    public init(callId: CallID, from: Peer, onHold: Bool) {
      self.callId = callId
      self.from = from
      self.onHold = onHold
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", from: Peer(userId: "", deviceId: ""), onHold: false)
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.bool("onHold", &onHold)
    }
  }

  /// `call-ended`: `{callId, reason, from?, replacedBy?}`.
  public struct CallEnded: ServerCallMessageBody, Hashable {
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

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", reason: .failed) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.enumeration("reason", &reason)
      try c.string("replacedBy", &replacedBy, .callId)
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

  /// Runs `visitor` on the payload at its concrete type (so the work is specialised per
  /// message); nil for `.unknown`. With `decode`, the one place a case meets its payload type.
  func accept<Visitor: ServerBodyVisitor>(_ visitor: inout Visitor) -> Visitor.Result? {
    switch self {
    case .welcome(let m): return visitor.visit(m, as: .welcome)
    case .ack(let m): return visitor.visit(m, as: .ack)
    case .error(let m): return visitor.visit(m, as: .error)
    case .invite(let m): return visitor.visit(m, as: .invite)
    case .accept(let m): return visitor.visit(m, as: .accept)
    case .offer(let m): return visitor.visit(m, as: .offer)
    case .answer(let m): return visitor.visit(m, as: .answer)
    case .candidate(let m): return visitor.visit(m, as: .candidate)
    case .callEnded(let m): return visitor.visit(m, as: .callEnded)
    case .ringing(let m): return visitor.visit(m, as: .ringing)
    case .endOfCandidates(let m): return visitor.visit(m, as: .endOfCandidates)
    case .iceRestartRequest(let m): return visitor.visit(m, as: .iceRestartRequest)
    case .mediaState(let m): return visitor.visit(m, as: .mediaState)
    case .hold(let m): return visitor.visit(m, as: .hold)
    case .groupInvite(let m): return visitor.visit(m, as: .groupInvite)
    case .groupUpdate(let m): return visitor.visit(m, as: .groupUpdate)
    case .groupMedia(let m): return visitor.visit(m, as: .groupMedia)
    case .groupOffer(let m): return visitor.visit(m, as: .groupOffer)
    case .groupAnswer(let m): return visitor.visit(m, as: .groupAnswer)
    case .groupCandidate(let m): return visitor.visit(m, as: .groupCandidate)
    case .groupStreamEnded(let m): return visitor.visit(m, as: .groupStreamEnded)
    case .groupEnded(let m): return visitor.visit(m, as: .groupEnded)
    case .unknown: return nil
    }
  }

  static func decode(_ type: ServerMessageType, _ d: inout WireDecoder) throws(ProtocolError) -> ServerMessage {
    switch type {
    case .welcome: return .welcome(try d.body())
    case .ack: return .ack(try d.body())
    case .error: return .error(try d.body())
    case .invite: return .invite(try d.body())
    case .accept: return .accept(try d.body())
    case .offer: return .offer(try d.body())
    case .answer: return .answer(try d.body())
    case .candidate: return .candidate(try d.body())
    case .callEnded: return .callEnded(try d.body())
    case .ringing: return .ringing(try d.body())
    case .endOfCandidates: return .endOfCandidates(try d.body())
    case .iceRestartRequest: return .iceRestartRequest(try d.body())
    case .mediaState: return .mediaState(try d.body())
    case .hold: return .hold(try d.body())
    case .groupInvite: return .groupInvite(try d.body())
    case .groupUpdate: return .groupUpdate(try d.body())
    case .groupMedia: return .groupMedia(try d.body())
    case .groupOffer: return .groupOffer(try d.body())
    case .groupAnswer: return .groupAnswer(try d.body())
    case .groupCandidate: return .groupCandidate(try d.body())
    case .groupStreamEnded: return .groupStreamEnded(try d.body())
    case .groupEnded: return .groupEnded(try d.body())
    }
  }

  /// The wire `type` string.
  public var typeName: String {
    if case .unknown(let m) = self { return m.type }
    return knownType?.rawValue ?? ""
  }

  /// The message type, nil for `.unknown`.
  public var knownType: ServerMessageType? {
    var naming = ServerBodyTypeNaming()
    return accept(&naming)
  }

  /// The call the message is about, if any.
  public var callId: CallID? {
    var reading = ServerBodyCallReading()
    return accept(&reading) ?? nil
  }

  /// The request id this message answers (welcome, ack, error).
  public var replyTo: String? {
    switch routed {
    case .session(.welcome(let m)): m.replyTo
    case .session(.ack(let m)): m.replyTo
    case .session(.error(let m)): m.replyTo
    case .oneToOne, .group, .unknown: nil
    }
  }
}

extension ServerMessage {
  /// An `ack` of exactly `requestID` with neither a call's nor a group's state (a relayed
  /// candidate's answer, which may go without a seq).
  public func isPlainAck(answering requestID: String) -> Bool {
    guard case .ack(let ack) = self else { return false }
    return ack.isPlain && ack.replyTo == requestID
  }
}

// MARK: - By desk

extension ServerMessage {
  /// A message handed to the desk that handles it (its type's `rules.desk`) at its payload's
  /// type, so that each desk of a client switches exhaustively over its own messages only: a
  /// new group message needs no decision in a 1:1 call's engine, and a new 1:1 message cannot
  /// be added without one there.
  public enum Route: Sendable, Equatable {
    case session(SessionMessage)
    case oneToOne(CallMessage)
    case group(GroupMessage)
    /// A type this library does not know (`ServerMessage.unknown`).
    case unknown(Unknown)
  }

  /// The session's messages.
  public enum SessionMessage: Sendable, Equatable {
    case welcome(Welcome)
    case ack(Ack)
    case error(ErrorMessage)
  }

  /// A 1:1 call's messages.
  public enum CallMessage: Sendable, Equatable {
    case invite(Invite)
    case ringing(Ringing)
    case accept(Accept)
    case offer(Offer)
    case answer(Answer)
    case candidate(Candidate)
    case endOfCandidates(EndOfCandidates)
    case iceRestartRequest(PeerEvent)
    case callEnded(CallEnded)
    case mediaState(MediaState)
    case hold(Hold)
  }

  /// A group call's messages.
  public enum GroupMessage: Sendable, Equatable {
    indirect case groupInvite(GroupInvite)
    case groupUpdate(GroupUpdate)
    case groupMedia(GroupMedia)
    case groupOffer(GroupDescription)
    case groupAnswer(GroupDescription)
    case groupCandidate(GroupCandidate)
    case groupStreamEnded(GroupStreamEnded)
    case groupEnded(GroupEnded)
  }

  /// The message by its desk; `routed`'s desk is always its type's `rules.desk`.
  public var routed: Route {
    switch self {
    case .welcome(let m): .session(.welcome(m))
    case .ack(let m): .session(.ack(m))
    case .error(let m): .session(.error(m))
    case .invite(let m): .oneToOne(.invite(m))
    case .ringing(let m): .oneToOne(.ringing(m))
    case .accept(let m): .oneToOne(.accept(m))
    case .offer(let m): .oneToOne(.offer(m))
    case .answer(let m): .oneToOne(.answer(m))
    case .candidate(let m): .oneToOne(.candidate(m))
    case .endOfCandidates(let m): .oneToOne(.endOfCandidates(m))
    case .iceRestartRequest(let m): .oneToOne(.iceRestartRequest(m))
    case .callEnded(let m): .oneToOne(.callEnded(m))
    case .mediaState(let m): .oneToOne(.mediaState(m))
    case .hold(let m): .oneToOne(.hold(m))
    case .groupInvite(let m): .group(.groupInvite(m))
    case .groupUpdate(let m): .group(.groupUpdate(m))
    case .groupMedia(let m): .group(.groupMedia(m))
    case .groupOffer(let m): .group(.groupOffer(m))
    case .groupAnswer(let m): .group(.groupAnswer(m))
    case .groupCandidate(let m): .group(.groupCandidate(m))
    case .groupStreamEnded(let m): .group(.groupStreamEnded(m))
    case .groupEnded(let m): .group(.groupEnded(m))
    case .unknown(let m): .unknown(m)
    }
  }
}

// MARK: - Work on a payload at its type

protocol ServerBodyVisitor {
  associatedtype Result
  mutating func visit<Body: ServerMessageBody>(_ body: Body, as type: ServerMessageType) -> Result
}

private struct ServerBodyTypeNaming: ServerBodyVisitor {
  func visit<Body: ServerMessageBody>(_ body: Body, as type: ServerMessageType) -> ServerMessageType { type }
}

private struct ServerBodyCallReading: ServerBodyVisitor {
  func visit<Body: ServerMessageBody>(_ body: Body, as type: ServerMessageType) -> CallID? { body.relatedCall }
}

/// The frame: `seq` (a number, a slot, or none) and `type` merged in among the payload's fields.
private struct ServerFrameWriting: ServerBodyVisitor {
  let seq: WireEncoder.EnvelopeMember?

  func visit<Body: ServerMessageBody>(_ body: Body, as type: ServerMessageType) -> (
    bytes: [UInt8], seqSlot: (offset: Int, leadingComma: Bool)?
  ) {
    let typeMember = WireEncoder.EnvelopeMember.text("type", type.rawValue)
    guard let seq else { return WireEncoder.encode(body, envelope: typeMember) }
    return WireEncoder.encode(body, envelope: seq, typeMember)
  }
}

// MARK: - Frames

/// A server message with the `seq` it travels with (nil for `welcome` and for errors sent
/// before the session exists).
public struct ServerEnvelope: Sendable, Equatable {
  public var seq: UInt64?
  public var message: ServerMessage

  public init(seq: UInt64?, message: ServerMessage) {
    self.seq = seq
    self.message = message
  }

  /// The frame as compact JSON with sorted keys.
  public var jsonString: String { String(decoding: encoded, as: UTF8.self) }

  /// The frame as a JSON tree.
  public var json: JSONValue { JSONValue(parsing: encoded) ?? .null }

  /// The frame's bytes: the payload's fields with `seq` and `type` among them.
  var encoded: [UInt8] {
    relayFrameBytes ?? genericEncoded
  }

  /// Any message through `WireEncoder` (`relayFrameBytes` writes two of them faster, the same).
  var genericEncoded: [UInt8] {
    var writing = ServerFrameWriting(seq: seq.map { .number("seq", $0) })
    return message.accept(&writing)?.bytes ?? unknownEncoded
  }

  /// An unknown message is written back as it came, with this envelope's seq.
  private var unknownEncoded: [UInt8] {
    guard case .unknown(let unknown) = message, case .object(var members) = unknown.json else { return [] }
    members["seq"] = seq.map { .int(Int64(clamping: $0)) }
    members["type"] = .string(unknown.type)
    return JSONValue.object(members).serialized
  }

  /// Decodes one frame from its tape. When decoding fails after a valid `seq` was read, the
  /// error's `seq` holds it.
  static func decode(_ tape: JSONTape, options: WireDecodingOptions) throws(ProtocolError) -> ServerEnvelope {
    let root = tape.root
    guard tape.kind(root) == .object else {
      throw ProtocolError(.badRequest, "message must be a JSON object")
    }
    var typeName: String?
    do throws(ProtocolError) {
      guard let typeIndex = tape.member(root, "type"), !tape.isNull(typeIndex) else {
        throw ProtocolError(.badRequest, "\"type\" is required")
      }
      guard let name = tape.string(typeIndex) else {
        throw ProtocolError(.badRequest, "\"type\" must be a string")
      }
      typeName = name
      var decoder = WireDecoder(tape: tape, object: root, path: "", options: options)
      var seq: Int64?
      try decoder.integer("seq", &seq, 0...Int64(Limits.maxSeq))
      let envelopeSeq = seq.map { UInt64($0) }
      guard let type = ServerMessageType(rawValue: name) else {
        if options.enforceLimits {
          throw ProtocolError(.unknownType, "unknown message type \(ClientMessage.quote(name))")
        }
        return ServerEnvelope(
          seq: envelopeSeq, message: .unknown(ServerMessage.Unknown(type: name, json: tape.value(root))))
      }
      return ServerEnvelope(seq: envelopeSeq, message: try ServerMessage.decode(type, &decoder))
    } catch {
      var error = error
      if let index = tape.member(root, "seq"), let number = tape.integer(index), number >= 0,
        UInt64(number) <= Limits.maxSeq
      {
        error.seq = UInt64(number)
      }
      if let index = tape.member(root, "callId"), let callId = tape.string(index) { error.callId = callId }
      error.messageType = typeName
      throw error
    }
  }
}

/// A server message encoded once for many recipients: each copy only splices its `seq` in.
public struct ServerFrame: Sendable {
  private enum Form: Sendable {
    case template(bytes: [UInt8], offset: Int, leadingComma: Bool)
    case whole(ServerMessage)
  }

  private let form: Form
  /// The message this frame encodes.
  public let message: ServerMessage

  public init(_ message: ServerMessage) {
    self.message = message
    var writing = ServerFrameWriting(seq: .seqSlot)
    guard let encoded = message.accept(&writing), let slot = encoded.seqSlot else {
      form = .whole(message)
      return
    }
    form = .template(bytes: encoded.bytes, offset: slot.offset, leadingComma: slot.leadingComma)
  }

  /// The frame with `seq`, byte for byte what `MessageCodec.encode(message, seq:)` gives.
  public func bytes(seq: UInt64) -> [UInt8] {
    switch form {
    case .whole(let message):
      return ServerEnvelope(seq: seq, message: message).encoded
    case .template(let bytes, let offset, let leadingComma):
      var writer = JSONWriter(capacity: bytes.count + 24)
      writer.append(contentsOf: bytes[..<offset])
      writer.append(leadingComma ? #",""# : #"""#)
      writer.append(#"seq":"#)
      writer.writeInteger(Int64(clamping: seq))
      if !leadingComma { writer.append(UInt8(ascii: ",")) }
      writer.append(contentsOf: bytes[offset...])
      return writer.bytes
    }
  }

  /// The bytes around the seq's digits: `bytes(seq: n)` is `head`, `n` in decimal, then `tail`,
  /// for a store that numbers the frame itself (a cluster's session ledger).
  public var splitAtSeq: (head: [UInt8], tail: [UInt8]) {
    switch form {
    case .template(let bytes, let offset, let leadingComma):
      // Each half written into one array reserved at its size: slices made arrays and then joined
      // cost five allocations a frame, on a cluster node for every message it numbers.
      let key = leadingComma ? #","seq":"# : #""seq":"#
      var head: [UInt8] = []
      head.reserveCapacity(offset + key.utf8.count)
      head.append(contentsOf: bytes[..<offset])
      head.append(contentsOf: key.utf8)
      var tail: [UInt8] = []
      tail.reserveCapacity(bytes.count - offset + 1)
      if !leadingComma { tail.append(UInt8(ascii: ",")) }
      tail.append(contentsOf: bytes[offset...])
      return (head, tail)
    case .whole(let message):
      // Written back as it came (an unknown type): its seq member is found in the encoding.
      let encoded = ServerEnvelope(seq: 0, message: message).encoded
      let key: [UInt8] = Array(#""seq":0"#.utf8)
      guard let start = encoded.firstRange(of: key)?.lowerBound else { return (encoded, []) }
      let digit = start + key.count - 1
      return (Array(encoded[..<digit]), Array(encoded[(digit + 1)...]))
    }
  }
}

extension ServerMessage.Ack {
  public var relatedCall: CallID? { callId }
}

extension ServerMessage.ErrorMessage {
  public var relatedCall: CallID? { callId }
}

extension ServerEnvelope: Codable {
  /// Through the frame's JSON shape, validated like the codec (slowly: use `MessageCodec`).
  public init(from decoder: any Decoder) throws {
    let bytes = try JSONValue(from: decoder).serialized
    self = try MessageCodec.decodeServerMessage(bytes, options: .strict)
  }

  public func encode(to encoder: any Encoder) throws {
    try json.encode(to: encoder)
  }
}
