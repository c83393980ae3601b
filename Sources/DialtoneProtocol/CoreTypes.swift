/// `{"sdp": "..."}`: an offer or answer body (`invite.offer`, `accept.answer`).
/// The kind (offer/answer) follows from the message that carries it; a `type` member,
/// as produced by `RTCSessionDescription.toJSON()`, is ignored.
import DialtoneJSON

public struct SessionDescription: WireCodable, Hashable {
  public var sdp: String

  public init(sdp: String) {
    self.sdp = sdp
  }

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    sdp = try r.sdp("sdp")
  }

  public var json: JSONValue { ["sdp": .string(sdp)] }
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

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    candidate = try r.string("candidate", minBytes: 0, maxBytes: Limits.maxCandidateBytes, tooLarge: true)
    sdpMid = try r.optionalString("sdpMid", maxBytes: Limits.maxCandidateFieldBytes)
    sdpMLineIndex = try r.optionalInt("sdpMLineIndex", in: 0...Int64(Limits.maxSDPMLineIndex)).map { Int($0) }
    usernameFragment = try r.optionalString("usernameFragment", maxBytes: Limits.maxCandidateFieldBytes)
  }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("candidate", candidate)
    o.set("sdpMid", sdpMid)
    if let sdpMLineIndex { o.set("sdpMLineIndex", sdpMLineIndex) }
    o.set("usernameFragment", usernameFragment)
    return o.json
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

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    urls = try r.stringArray("urls", acceptSingle: true, nonEmpty: true)
    username = try r.optionalString("username")
    credential = try r.optionalString("credential")
  }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.members["urls"] = .array(urls.map { .string($0) })
    o.set("username", username)
    o.set("credential", credential)
    return o.json
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

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    userId = try r.userId("userId")
    deviceId = try r.deviceId("deviceId")
    name = try r.optionalName("name")
  }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("userId", userId)
    o.set("deviceId", deviceId)
    o.set("name", name)
    return o.json
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

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    callId = try r.callId()
    callerId = try r.userId("callerId")
    calleeId = try r.userId("calleeId")
    callerDeviceId = try r.deviceId("callerDeviceId")
    calleeDeviceId = try r.optionalDeviceId("calleeDeviceId")
    video = try r.bool("video")
    let stateName = try r.string("state")
    guard let phase = CallPhase(rawValue: stateName) else {
      throw ProtocolError(.badRequest, "\(r.quoted("state")) must be one of ringing, accepted, ended")
    }
    state = phase
    createdAt = try r.timestamp("createdAt")
    answeredAt = try r.optionalTimestamp("answeredAt")
    endedAt = try r.optionalTimestamp("endedAt")
    endReason = try r.optionalEndReason("endReason")
  }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("callId", callId)
    o.set("callerId", callerId)
    o.set("calleeId", calleeId)
    o.set("callerDeviceId", callerDeviceId)
    o.set("calleeDeviceId", calleeDeviceId)
    o.set("video", video)
    o.set("state", state.rawValue)
    o.set("createdAt", createdAt)
    o.set("answeredAt", answeredAt)
    o.set("endedAt", endedAt)
    o.set("endReason", endReason?.rawValue)
    return o.json
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

  public init(
    callId: CallID, callerId: String, calleeId: String, answeredBy: String? = nil, video: Bool, createdAt: Int64,
    answeredAt: Int64? = nil, endedAt: Int64? = nil, endReason: EndReason? = nil, durationMs: Int64? = nil
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
  }

  public init(json: JSONValue, path: String, options: WireDecodingOptions) throws(ProtocolError) {
    let r = try FieldReader(json, path: path, options: options)
    callId = try r.callId()
    callerId = try r.userId("callerId")
    calleeId = try r.userId("calleeId")
    answeredBy = try r.optionalDeviceId("answeredBy")
    video = try r.bool("video")
    createdAt = try r.timestamp("createdAt")
    answeredAt = try r.optionalTimestamp("answeredAt")
    endedAt = try r.optionalTimestamp("endedAt")
    endReason = try r.optionalEndReason("endReason")
    durationMs = try r.optionalInt("durationMs", in: 0...Int64.max)
  }

  public var json: JSONValue {
    var o = ObjectBuilder()
    o.set("callId", callId)
    o.set("callerId", callerId)
    o.set("calleeId", calleeId)
    o.set("answeredBy", answeredBy)
    o.set("video", video)
    o.set("createdAt", createdAt)
    o.set("answeredAt", answeredAt)
    o.set("endedAt", endedAt)
    o.set("endReason", endReason?.rawValue)
    o.set("durationMs", durationMs)
    return o.json
  }
}
