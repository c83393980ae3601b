/// `{"sdp": "..."}`: an offer or answer body (`invite.offer`, `accept.answer`).
/// The kind (offer/answer) follows from the message that carries it; a `type` member,
/// as produced by `RTCSessionDescription.toJSON()`, is ignored.
public struct SessionDescription: WireCodable, Hashable {
  public var sdp: String

  public init(sdp: String) {
    self.sdp = sdp
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(sdp: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("sdp", &sdp, .sdp)
  }
}

/// A trickled ICE candidate, the same shape as `RTCIceCandidateInit`.
public struct IceCandidate: WireCodable, Hashable {
  /// The `candidate:` line (without `a=`). An empty string means end of candidates for the
  /// media section, as browsers emit it; prefer the `end-of-candidates` message.
  public var candidate: String
  public var sdpMid: String?
  public var sdpMLineIndex: Int?
  public var usernameFragment: String?

  public init(candidate: String, sdpMid: String? = nil, sdpMLineIndex: Int? = nil, usernameFragment: String? = nil) {
    self.candidate = candidate
    self.sdpMid = sdpMid
    self.sdpMLineIndex = sdpMLineIndex
    self.usernameFragment = usernameFragment
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(candidate: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("candidate", &candidate, WireText(minBytes: 0, maxBytes: Limits.maxCandidateBytes, tooLarge: true))
    try c.integer("sdpMLineIndex", &sdpMLineIndex, 0...Int64(Limits.maxSDPMLineIndex))
    try c.string("sdpMid", &sdpMid, WireText(minBytes: 0, maxBytes: Limits.maxCandidateFieldBytes))
    try c.string("usernameFragment", &usernameFragment, WireText(minBytes: 0, maxBytes: Limits.maxCandidateFieldBytes))
  }
}

/// A STUN/TURN server, the same shape as `RTCIceServer`.
/// Decoding also accepts `urls` as a single string; encoding always writes an array.
public struct IceServer: WireCodable, Hashable {
  public var urls: [String]
  public var username: String?
  public var credential: String?

  public init(urls: [String], username: String? = nil, credential: String? = nil) {
    self.urls = urls
    self.username = username
    self.credential = credential
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(urls: []) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("credential", &credential, .any)
    try c.strings("urls", &urls, acceptSingle: true, nonEmpty: true)
    try c.string("username", &username, .any)
  }
}

/// A user's device taking part in a call (`from` in server messages).
public struct Peer: WireCodable, Hashable {
  public var userId: String
  public var deviceId: String
  /// Display name: from `invite.callerName`, else the token's `name` claim.
  public var name: String?

  public init(userId: String, deviceId: String, name: String? = nil) {
    self.userId = userId
    self.deviceId = deviceId
    self.name = name
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", deviceId: "") }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("deviceId", &deviceId, .deviceId)
    try c.string("name", &name, .name)
    try c.string("userId", &userId, .userId)
  }
}

/// The live state of a call (`get-call` result, `ack.call`).
public struct CallState: WireCodable, Hashable {
  public var callId: CallID
  public var callerId: String
  public var calleeId: String
  public var callerDeviceId: String
  /// The callee device that accepted; nil until accepted.
  public var calleeDeviceId: String?
  public var video: Bool
  public var state: CallPhase
  /// ms since the Unix epoch.
  public var createdAt: Int64
  public var answeredAt: Int64?
  public var endedAt: Int64?
  public var endReason: EndReason?

  public init(
    callId: CallID, callerId: String, calleeId: String, callerDeviceId: String, calleeDeviceId: String? = nil,
    video: Bool, state: CallPhase, createdAt: Int64, answeredAt: Int64? = nil, endedAt: Int64? = nil,
    endReason: EndReason? = nil
  ) {
    self.callId = callId
    self.callerId = callerId
    self.calleeId = calleeId
    self.callerDeviceId = callerDeviceId
    self.calleeDeviceId = calleeDeviceId
    self.video = video
    self.state = state
    self.createdAt = createdAt
    self.answeredAt = answeredAt
    self.endedAt = endedAt
    self.endReason = endReason
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", callerId: "", calleeId: "", callerDeviceId: "", video: false, state: .ended, createdAt: 0)
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("answeredAt", &answeredAt, 0...Int64.max)
    try c.string("callId", &callId, .callId)
    try c.string("calleeDeviceId", &calleeDeviceId, .deviceId)
    try c.string("calleeId", &calleeId, .userId)
    try c.string("callerDeviceId", &callerDeviceId, .deviceId)
    try c.string("callerId", &callerId, .userId)
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.enumeration("endReason", &endReason)
    try c.integer("endedAt", &endedAt, 0...Int64.max)
    try c.enumeration("state", &state)
    try c.bool("video", &video)
  }
}

/// A call in the history (`GET /v1/calls`).
public struct CallRecord: WireCodable, Hashable {
  public var callId: CallID
  public var callerId: String
  public var calleeId: String
  /// The callee device that accepted, if any.
  public var answeredBy: String?
  public var video: Bool
  public var createdAt: Int64
  public var answeredAt: Int64?
  public var endedAt: Int64?
  public var endReason: EndReason?
  /// `endedAt - answeredAt` for calls that were answered and have ended.
  public var durationMs: Int64?
  /// `true` only in the callee's own view of a call that the callee's block silenced (a server
  /// that keeps such calls in the blocker's history); absent otherwise, and never for the caller.
  public var blocked: Bool?

  public init(
    callId: CallID, callerId: String, calleeId: String, answeredBy: String? = nil, video: Bool, createdAt: Int64,
    answeredAt: Int64? = nil, endedAt: Int64? = nil, endReason: EndReason? = nil, durationMs: Int64? = nil,
    blocked: Bool? = nil
  ) {
    self.callId = callId
    self.callerId = callerId
    self.calleeId = calleeId
    self.answeredBy = answeredBy
    self.video = video
    self.createdAt = createdAt
    self.answeredAt = answeredAt
    self.endedAt = endedAt
    self.endReason = endReason
    self.durationMs = durationMs
    self.blocked = blocked
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", callerId: "", calleeId: "", video: false, createdAt: 0)
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.integer("answeredAt", &answeredAt, 0...Int64.max)
    try c.string("answeredBy", &answeredBy, .deviceId)
    try c.bool("blocked", &blocked)
    try c.string("callId", &callId, .callId)
    try c.string("calleeId", &calleeId, .userId)
    try c.string("callerId", &callerId, .userId)
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.integer("durationMs", &durationMs, 0...Int64.max)
    try c.enumeration("endReason", &endReason)
    try c.integer("endedAt", &endedAt, 0...Int64.max)
    try c.bool("video", &video)
  }
}
