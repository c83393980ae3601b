// The group-call payloads that are one object in both directions (docs/protocol.md, "Group
// calls"), described once so that the client's and the server's cannot drift apart.
// `ClientMessage` and `ServerMessage` name them after their messages (`GroupCandidate`,
// `GroupStream`, `GroupStreamEnded`), as `CallAction` serves several client messages.

/// `group-candidate`: `{callId, stream, candidate}`: one trickled candidate of one stream, the
/// device's own (client → server) or the SFU's (server → client).
public struct GroupStreamCandidate: CallMessageBody, ServerCallMessageBody, Hashable {
  public var callId: CallID
  public var stream: String
  public var candidate: IceCandidate

  public init(callId: CallID, stream: String, candidate: IceCandidate) {
    self.callId = callId
    self.stream = stream
    self.candidate = candidate
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", stream: "", candidate: IceCandidate(candidate: ""))
  }

  // Both directions' protocols give `relatedCall` a default: this one picks it.
  public var relatedCall: CallID? { callId }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("callId", &callId, .callId)
    try c.object("candidate", &candidate)
    try c.string("stream", &stream, .streamId)
  }
}

/// `{callId, stream}`: one stream of a group call. The client's `group-end-of-candidates` (no
/// more candidates on it) and the server's `group-stream-ended` (it is gone: close its connection).
public struct GroupCallStream: CallMessageBody, ServerCallMessageBody, Hashable {
  public var callId: CallID
  public var stream: String

  public init(callId: CallID, stream: String) {
    self.callId = callId
    self.stream = stream
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", stream: "") }

  // Both directions' protocols give `relatedCall` a default: this one picks it.
  public var relatedCall: CallID? { callId }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("callId", &callId, .callId)
    try c.string("stream", &stream, .streamId)
  }
}
