import DialtoneJSON

/// The `type` values of client → server messages.
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
  case mediaState = "media-state"
  case hold
  case quality
  case groupCreate = "group-create"
  case groupRinging = "group-ringing"
  case groupDecline = "group-decline"
  case groupJoin = "group-join"
  case groupLeave = "group-leave"
  case groupEnd = "group-end"
  case groupInvite = "group-invite"
  case groupRemove = "group-remove"
  case roomJoin = "room-join"
  case groupOffer = "group-offer"
  case groupAnswer = "group-answer"
  case groupCandidate = "group-candidate"
  case groupEndOfCandidates = "group-end-of-candidates"
  case groupRestart = "group-restart"
  case getGroup = "get-group"

  /// Whether messages of this type carry an `id` (all but `ack`).
  public var hasID: Bool { self != .ack }

  /// Whether the type belongs to group calls (`group-*`, `room-join`, `get-group`).
  public var isGroupCall: Bool { rules.desk == .group }

  /// What the server does with a message of this type, decided here once per type: the switch
  /// has no `default`, so a new type cannot be added without saying.
  public var rules: ClientMessageRules {
    switch self {
    case .hello, .ack, .ping: ClientMessageRules(desk: .session)
    case .invite: ClientMessageRules(desk: .oneToOne, startsACall: true)
    case .ringing, .accept, .decline, .busy, .cancel, .hangup, .getCall: ClientMessageRules(desk: .oneToOne)
    case .offer, .answer, .iceRestartRequest, .mediaState, .hold: ClientMessageRules(desk: .oneToOne, relayed: true)
    case .candidate:
      ClientMessageRules(
        desk: .oneToOne, relayed: true, ackMayWait: true, mayBeRefusedOnceHandled: true, repeatHandledAfresh: true)
    case .endOfCandidates: ClientMessageRules(desk: .oneToOne, relayed: true, ackMayWait: true)
    case .quality: ClientMessageRules(desk: .quality)
    case .groupCreate, .roomJoin, .groupInvite: ClientMessageRules(desk: .group, startsACall: true)
    case .groupRemove: ClientMessageRules(desk: .group)
    case .groupRinging, .groupDecline, .groupJoin, .groupLeave, .groupEnd, .getGroup, .groupOffer, .groupAnswer,
      .groupRestart:
      ClientMessageRules(desk: .group)
    case .groupCandidate, .groupEndOfCandidates: ClientMessageRules(desk: .group, ackMayWait: true)
    }
  }
}

/// How the server treats a client message type (`ClientMessageType.rules`).
public struct ClientMessageRules: Sendable, Equatable {
  public enum Desk: Sendable, Equatable {
    /// The session's own business: `hello`, `ack`, `ping`.
    case session
    /// A 1:1 call's request.
    case oneToOne
    /// A group call's request.
    case group
    /// A quality report, stored with its call.
    case quality
  }

  public var desk: Desk
  /// Passed on to the other side of the call as it came (its relay latency is measured).
  public var relayed = false
  /// Its `ack` may ride with the next message to the sender instead of a write of its own:
  /// trickled candidates come in bursts and nobody waits for their acks.
  public var ackMayWait = false
  /// It rings people or opens a room: counted by the per-user limit on calls started.
  public var startsACall = false
  /// Its event may be refused after it is handled (over a write-behind session's bound), the
  /// client's repeat handled afresh, so a write-behind node does not ask for room before handling
  /// it: a relayed 1:1 candidate, which moves no call's state and is most of a call's messages
  /// (`WriteBehindHolder.submit`). Anything else is asked first: refused once handled, its repeat
  /// could find the call moved on without it.
  public var mayBeRefusedOnceHandled = false
  /// Sent again with its id, it is handled afresh rather than answered from memory where its ack
  /// goes without a seq (protocol.md 5.3: one server, a write-behind cluster): a 1:1 candidate,
  /// relayed again (adding a candidate twice changes nothing in ICE). Its answer is then not
  /// remembered either, which keeps the memory for the answers a repeat must find (most of a
  /// call's messages are candidates) and spares each relayed one a look-up.
  public var repeatHandledAfresh = false

  public init(
    desk: Desk, relayed: Bool = false, ackMayWait: Bool = false, startsACall: Bool = false,
    mayBeRefusedOnceHandled: Bool = false, repeatHandledAfresh: Bool = false
  ) {
    self.desk = desk
    self.relayed = relayed
    self.ackMayWait = ackMayWait
    self.startsACall = startsACall
    self.mayBeRefusedOnceHandled = mayBeRefusedOnceHandled
    self.repeatHandledAfresh = repeatHandledAfresh
  }
}

/// A client message's payload: its fields without the envelope (`type`, `id`).
public protocol ClientMessageBody: WireCodable {
  /// The call the message is about, if any.
  var relatedCall: CallID? { get }
}

/// A payload about one call.
public protocol CallMessageBody: ClientMessageBody {
  var callId: CallID { get }
}

extension ClientMessageBody {
  public var relatedCall: CallID? { nil }
}

extension CallMessageBody {
  public var relatedCall: CallID? { callId }
}

/// One client frame: the envelope (`id`, absent only for `ack`) and the message.
public struct ClientEnvelope: Sendable, Equatable {
  /// The request id the server's answer (`ack`/`error`/`welcome`) carries as `replyTo`.
  public var id: String?
  public var message: ClientMessage

  public init(id: String?, message: ClientMessage) {
    self.id = id
    self.message = message
  }

  /// The frame as compact JSON with sorted keys.
  public var jsonString: String { String(decoding: encoded, as: UTF8.self) }

  /// The frame as a JSON tree.
  public var json: JSONValue { JSONValue(parsing: encoded) ?? .null }
}

/// A message from a client to the server.
public enum ClientMessage: Sendable, Equatable {
  /// First message on every socket.
  case hello(Hello)
  /// Cumulative acknowledgement of server messages.
  case ack(Ack)
  /// Application-level keepalive; answered with `ack`.
  case ping(Ping)
  /// Start a call.
  case invite(Invite)
  /// A callee device is alerting its user (and may ask for a pre-connected leg).
  case ringing(Ringing)
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
  case endOfCandidates(EndOfCandidates)
  /// The answerer asks the offerer to restart ICE.
  case iceRestartRequest(CallAction)
  /// Fetch a call's state; answered with `ack` carrying `call`.
  case getCall(CallAction)
  /// The sender's camera went off or on (no renegotiation: the track just stops sending).
  case mediaState(MediaState)
  /// The sender put the call on hold, or took it off hold (the call and its connection stay up).
  case hold(Hold)
  /// What the client measured of a call (set-up milestones, RTT, loss, the media path). Out of
  /// line: the largest payload by far, it would set the size of every message (see `OutOfLine`).
  indirect case quality(QualityReport)
  /// Start a group call and ring its members.
  case groupCreate(GroupCreate)
  /// A member's device is alerting its user.
  case groupRinging(CallAction)
  /// A member declines the ring (for all of the member's devices).
  case groupDecline(CallAction)
  /// A member's device joins the call (answering the ring, or later while the call lasts).
  case groupJoin(GroupJoin)
  /// A participant leaves; the call goes on for the others.
  case groupLeave(CallAction)
  /// The creator ends the call for everyone (before anyone joined: cancels it).
  case groupEnd(CallAction)
  /// Ring more people into a call already under way.
  case groupInvite(GroupInvite)
  /// The call's owner takes a member out of it.
  case groupRemove(GroupRemove)
  /// Join (or start) the call of an app-defined room, without ringing anyone.
  case roomJoin(RoomJoin)
  /// The SDP offer of the sender's `publisher` stream (Janus).
  case groupOffer(GroupDescription)
  /// The SDP answer to the server's offer of a stream (Janus).
  case groupAnswer(GroupDescription)
  /// One trickled candidate of one of the sender's streams (Janus).
  case groupCandidate(GroupCandidate)
  /// No more candidates on one of the sender's streams (Janus).
  case groupEndOfCandidates(GroupStream)
  /// A new offer of a stream the server offered, whose connection lost its path (Janus).
  case groupRestart(GroupStreamRestart)
  /// Fetch a group call's state; answered with `ack` carrying `group`.
  case getGroup(CallAction)

  /// Runs `visitor` on the payload at its concrete type (so the work is specialised per
  /// message). With `decode`, the one place a case meets its payload type.
  func accept<Visitor: ClientBodyVisitor>(_ visitor: inout Visitor) -> Visitor.Result {
    switch self {
    case .hello(let m): return visitor.visit(m, as: .hello)
    case .ack(let m): return visitor.visit(m, as: .ack)
    case .ping(let m): return visitor.visit(m, as: .ping)
    case .invite(let m): return visitor.visit(m, as: .invite)
    case .accept(let m): return visitor.visit(m, as: .accept)
    case .offer(let m): return visitor.visit(m, as: .offer)
    case .answer(let m): return visitor.visit(m, as: .answer)
    case .candidate(let m): return visitor.visit(m, as: .candidate)
    case .ringing(let m): return visitor.visit(m, as: .ringing)
    case .decline(let m): return visitor.visit(m, as: .decline)
    case .busy(let m): return visitor.visit(m, as: .busy)
    case .cancel(let m): return visitor.visit(m, as: .cancel)
    case .hangup(let m): return visitor.visit(m, as: .hangup)
    case .endOfCandidates(let m): return visitor.visit(m, as: .endOfCandidates)
    case .iceRestartRequest(let m): return visitor.visit(m, as: .iceRestartRequest)
    case .getCall(let m): return visitor.visit(m, as: .getCall)
    case .mediaState(let m): return visitor.visit(m, as: .mediaState)
    case .hold(let m): return visitor.visit(m, as: .hold)
    case .quality(let m): return visitor.visit(m, as: .quality)
    case .groupCreate(let m): return visitor.visit(m, as: .groupCreate)
    case .groupRinging(let m): return visitor.visit(m, as: .groupRinging)
    case .groupDecline(let m): return visitor.visit(m, as: .groupDecline)
    case .groupJoin(let m): return visitor.visit(m, as: .groupJoin)
    case .groupLeave(let m): return visitor.visit(m, as: .groupLeave)
    case .groupEnd(let m): return visitor.visit(m, as: .groupEnd)
    case .groupInvite(let m): return visitor.visit(m, as: .groupInvite)
    case .groupRemove(let m): return visitor.visit(m, as: .groupRemove)
    case .roomJoin(let m): return visitor.visit(m, as: .roomJoin)
    case .groupOffer(let m): return visitor.visit(m, as: .groupOffer)
    case .groupAnswer(let m): return visitor.visit(m, as: .groupAnswer)
    case .groupCandidate(let m): return visitor.visit(m, as: .groupCandidate)
    case .groupEndOfCandidates(let m): return visitor.visit(m, as: .groupEndOfCandidates)
    case .groupRestart(let m): return visitor.visit(m, as: .groupRestart)
    case .getGroup(let m): return visitor.visit(m, as: .getGroup)
    }
  }

  static func decode(_ type: ClientMessageType, _ d: inout WireDecoder) throws(ProtocolError) -> ClientMessage {
    switch type {
    case .hello: return .hello(try d.body())
    case .ack: return .ack(try d.body())
    case .ping: return .ping(try d.body())
    case .invite: return .invite(try d.body())
    case .accept: return .accept(try d.body())
    case .offer: return .offer(try d.body())
    case .answer: return .answer(try d.body())
    case .candidate: return .candidate(try d.body())
    case .ringing: return .ringing(try d.body())
    case .decline: return .decline(try d.body())
    case .busy: return .busy(try d.body())
    case .cancel: return .cancel(try d.body())
    case .hangup: return .hangup(try d.body())
    case .endOfCandidates: return .endOfCandidates(try d.body())
    case .iceRestartRequest: return .iceRestartRequest(try d.body())
    case .getCall: return .getCall(try d.body())
    case .mediaState: return .mediaState(try d.body())
    case .hold: return .hold(try d.body())
    case .quality: return .quality(try d.body())
    case .groupCreate: return .groupCreate(try d.body())
    case .groupRinging: return .groupRinging(try d.body())
    case .groupDecline: return .groupDecline(try d.body())
    case .groupJoin: return .groupJoin(try d.body())
    case .groupLeave: return .groupLeave(try d.body())
    case .groupEnd: return .groupEnd(try d.body())
    case .groupInvite: return .groupInvite(try d.body())
    case .groupRemove: return .groupRemove(try d.body())
    case .roomJoin: return .roomJoin(try d.body())
    case .groupOffer: return .groupOffer(try d.body())
    case .groupAnswer: return .groupAnswer(try d.body())
    case .groupCandidate: return .groupCandidate(try d.body())
    case .groupEndOfCandidates: return .groupEndOfCandidates(try d.body())
    case .groupRestart: return .groupRestart(try d.body())
    case .getGroup: return .getGroup(try d.body())
    }
  }

  public var type: ClientMessageType {
    var naming = ClientBodyTypeNaming()
    return accept(&naming)
  }

  /// The call the message is about, if any.
  public var callId: CallID? {
    var reading = ClientBodyCallReading()
    return accept(&reading)
  }

  // MARK: Payloads

  /// `hello`: `{version, token?, resume?, client?}`.
  public struct Hello: ClientMessageBody, Hashable {
    public var version: Int
    /// The JWT, when it is not sent in the `Authorization` header of the upgrade request.
    public var token: String?
    public var resume: Resume?
    public var client: ClientInfo?
    /// The protocol extensions this client implements (`ProtocolFeature`); unknown ones are ignored.
    public var features: [String]

    public init(
      version: Int = ProtocolVersion.current, token: String? = nil, resume: Resume? = nil, client: ClientInfo? = nil,
      features: [String] = []
    ) {
      self.version = version
      self.token = token
      self.resume = resume
      self.client = client
      self.features = features
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init() }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.object("client", &client)
      try c.names("features", &features, .feature)
      try c.object("resume", &resume)
      try c.string("token", &token, .token)
      try c.integer("version", &version, Int64(Int32.min)...Int64(Int32.max))
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

    public init(wirePlaceholder _: WirePlaceholder) { self.init(sessionId: "", lastSeq: 0) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.seq("lastSeq", &lastSeq)
      try c.string("sessionId", &sessionId, .sessionId)
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

    public init(wirePlaceholder _: WirePlaceholder) { self.init() }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("name", &name, .clientInfo)
      try c.string("version", &version, .clientInfo)
    }
  }

  /// `ack`: `{seq}`. The only client message without `id`.
  public struct Ack: ClientMessageBody, Hashable {
    public var seq: UInt64

    public init(seq: UInt64) {
      self.seq = seq
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(seq: 0) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.seq("seq", &seq)
    }
  }

  /// `ping`: no fields.
  public struct Ping: ClientMessageBody, Hashable {

    public init() {}

    public init(wirePlaceholder _: WirePlaceholder) {}

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {}
  }

  /// `invite`: `{callId, to, video, offer?, callerName?}`.
  public struct Invite: CallMessageBody, Hashable {
    public var callId: CallID
    /// The callee's user id.
    public var to: String
    public var video: Bool
    public var offer: SessionDescription?
    /// Overrides the token's `name` claim as the caller's display name for this call.
    public var callerName: String?
    /// The caller makes a pre-connected leg for each callee device that asks (protocol.md 11).
    public var preconnect: Bool

    public init(
      callId: CallID, to: String, video: Bool, offer: SessionDescription? = nil, callerName: String? = nil,
      preconnect: Bool = false
    ) {
      self.callId = callId
      self.to = to
      self.video = video
      self.offer = offer
      self.callerName = callerName
      self.preconnect = preconnect
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", to: "", video: false) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.string("callerName", &callerName, .name)
      try c.object("offer", &offer)
      try c.flag("preconnect", &preconnect)
      try c.string("to", &to, .userId)
      try c.bool("video", &video)
    }
  }

  /// `ringing`: `{callId, preconnect?}`. `preconnect` is written only when true.
  public struct Ringing: CallMessageBody, Hashable {
    public var callId: CallID
    /// This device asks the caller for a leg of its own, connected while it rings (9b).
    public var preconnect: Bool

    public init(callId: CallID, preconnect: Bool = false) {
      self.callId = callId
      self.preconnect = preconnect
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.flag("preconnect", &preconnect)
    }
  }

  /// `end-of-candidates`: `{callId, toDevice?}`.
  public struct EndOfCandidates: CallMessageBody, Hashable {
    public var callId: CallID
    /// The caller, while the call rings: the callee device whose leg this is for (9b).
    public var toDevice: String?

    public init(callId: CallID, toDevice: String? = nil) {
      self.callId = callId
      self.toDevice = toDevice
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.string("toDevice", &toDevice, .deviceId)
    }
  }

  /// `{callId}`: decline, busy, cancel, hangup, ice-restart-request, get-call.
  public struct CallAction: CallMessageBody, Hashable {
    public var callId: CallID

    public init(callId: CallID) {
      self.callId = callId
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
    }
  }

  /// `media-state`: `{callId, camera}`.
  public struct MediaState: CallMessageBody, Hashable {
    public var callId: CallID
    /// Whether the sender's camera is sending.
    public var camera: Bool

    public init(callId: CallID, camera: Bool) {
      self.callId = callId
      self.camera = camera
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", camera: false) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.bool("camera", &camera)
    }
  }

  /// `hold`: `{callId, onHold}`.
  public struct Hold: CallMessageBody, Hashable {
    public var callId: CallID
    /// Whether the sender holds the call now.
    public var onHold: Bool

    public init(callId: CallID, onHold: Bool) {
      self.callId = callId
      self.onHold = onHold
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", onHold: false) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.bool("onHold", &onHold)
    }
  }

  /// `accept`: `{callId, answer?}`.
  public struct Accept: CallMessageBody, Hashable {
    public var callId: CallID
    /// The answer to the offer carried by the invite; absent when the invite had no offer.
    public var answer: SessionDescription?

    public init(callId: CallID, answer: SessionDescription? = nil) {
      self.callId = callId
      self.answer = answer
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.object("answer", &answer)
      try c.string("callId", &callId, .callId)
    }
  }

  /// `offer`: `{callId, sdp, iceRestart?}`. `iceRestart` is written only when true.
  public struct Offer: CallMessageBody, Hashable {
    public var callId: CallID
    public var sdp: String
    public var iceRestart: Bool
    /// The caller, while the call rings: the callee device whose leg this offer opens (9b).
    public var toDevice: String?

    public init(callId: CallID, sdp: String, iceRestart: Bool = false, toDevice: String? = nil) {
      self.callId = callId
      self.sdp = sdp
      self.iceRestart = iceRestart
      self.toDevice = toDevice
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", sdp: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.flag("iceRestart", &iceRestart)
      try c.string("sdp", &sdp, .sdp)
      try c.string("toDevice", &toDevice, .deviceId)
    }
  }

  /// `answer`: `{callId, sdp}`.
  public struct Answer: CallMessageBody, Hashable {
    public var callId: CallID
    public var sdp: String

    public init(callId: CallID, sdp: String) {
      self.callId = callId
      self.sdp = sdp
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", sdp: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.string("sdp", &sdp, .sdp)
    }
  }

  /// `candidate`: `{callId, candidate: {candidate, sdpMid?, sdpMLineIndex?, usernameFragment?}}`.
  public struct Candidate: CallMessageBody, Hashable {
    public var callId: CallID
    public var candidate: IceCandidate
    /// The caller, while the call rings: the callee device whose leg this is for (9b).
    public var toDevice: String?

    public init(callId: CallID, candidate: IceCandidate, toDevice: String? = nil) {
      self.callId = callId
      self.candidate = candidate
      self.toDevice = toDevice
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", candidate: IceCandidate(candidate: "")) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("candidate", &candidate)
      try c.string("toDevice", &toDevice, .deviceId)
    }
  }

  /// A type name quoted for an error message, shortened if absurdly long.
  static func quote(_ name: String) -> String {
    let shown = name.utf8.count > 64 ? String(name.prefix(64)) + "…" : name
    return JSONValue.string(shown).serializedString
  }
}

// MARK: - Work on a payload at its type

protocol ClientBodyVisitor {
  associatedtype Result
  mutating func visit<Body: ClientMessageBody>(_ body: Body, as type: ClientMessageType) -> Result
}

private struct ClientBodyTypeNaming: ClientBodyVisitor {
  func visit<Body: ClientMessageBody>(_ body: Body, as type: ClientMessageType) -> ClientMessageType { type }
}

private struct ClientBodyCallReading: ClientBodyVisitor {
  func visit<Body: ClientMessageBody>(_ body: Body, as type: ClientMessageType) -> CallID? { body.relatedCall }
}

/// The frame: `id` (when there is one) and `type` merged in among the payload's fields.
private struct ClientFrameWriting: ClientBodyVisitor {
  let id: String?

  func visit<Body: ClientMessageBody>(_ body: Body, as type: ClientMessageType) -> [UInt8] {
    let typeMember = WireEncoder.EnvelopeMember.text("type", type.rawValue)
    guard let id else { return WireEncoder.encode(body, envelope: typeMember).bytes }
    return WireEncoder.encode(body, envelope: .text("id", id), typeMember).bytes
  }
}

// MARK: - Frames

extension ClientEnvelope {
  /// Decodes one frame from its tape. The error of a failed decode carries the frame's
  /// `id` (as `replyTo`), `callId` and `type` when they could be read.
  static func decode(_ tape: JSONTape, options: WireDecodingOptions) throws(ProtocolError) -> ClientEnvelope {
    let root = tape.root
    guard tape.kind(root) == .object else {
      throw ProtocolError(.badRequest, "message must be a JSON object")
    }
    // The type is read from its bytes (`ClientMessageType(wireName:)`: no `String` made, none
    // hashed); its text is made only for an error's context.
    let typeIndex = tape.member(root, "type")
    do throws(ProtocolError) {
      guard let typeIndex, !tape.isNull(typeIndex) else {
        throw ProtocolError(.badRequest, "\"type\" is required")
      }
      guard let found = tape.withStringBytes(typeIndex, ClientMessageType.init(wireName:)) else {
        throw ProtocolError(.badRequest, "\"type\" must be a string")
      }
      guard let type = found else {
        let name = tape.string(typeIndex) ?? ""
        throw ProtocolError(.unknownType, "unknown message type \(ClientMessage.quote(name))")
      }
      var decoder = WireDecoder(tape: tape, object: root, path: "", options: options)
      var id: String?
      if type.hasID {
        var read = ""
        try decoder.string("id", &read, .messageId)
        id = read
      }
      return ClientEnvelope(id: id, message: try ClientMessage.decode(type, &decoder))
    } catch {
      // Context for the error reply, read leniently (an ack's id, if any, is not a request id).
      var error = error
      let typeName = typeIndex.flatMap { tape.string($0) }
      if typeName != "ack", let index = tape.member(root, "id"), let id = tape.string(index),
        (1...Limits.maxMessageIDBytes).contains(id.utf8.count)
      {
        error.replyTo = id
      }
      if let index = tape.member(root, "callId"), let callId = tape.string(index), CallIDRules.isValid(callId) {
        error.callId = callId
      }
      error.messageType = typeName
      throw error
    }
  }

  /// The frame's bytes: the payload's fields with `id` and `type` among them.
  var encoded: [UInt8] {
    var writing = ClientFrameWriting(id: id)
    return message.accept(&writing)
  }
}

extension WireDecoder {
  /// A message payload read from the frame's own object.
  mutating func body<Body: WireCodable>() throws(ProtocolError) -> Body {
    var body = Body(wirePlaceholder: WirePlaceholder())
    try body.wire(&self)
    return body
  }
}

extension ClientEnvelope: Codable {
  /// Through the frame's JSON shape, validated like the codec (slowly: use `MessageCodec`).
  public init(from decoder: any Decoder) throws {
    let bytes = try JSONValue(from: decoder).serialized
    self = try MessageCodec.decodeClientMessage(bytes)
  }

  public func encode(to encoder: any Encoder) throws {
    try json.encode(to: encoder)
  }
}
