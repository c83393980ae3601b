/// The payloads of the server's group-call messages (docs/protocol.md, "Group calls").
extension ServerMessage {
  /// `group-invite`: `{callId, from, video, title?, memberCount, createdAt, group}`: rings a
  /// member's devices.
  public struct GroupInvite: ServerCallMessageBody, Hashable {
    public var callId: CallID
    /// The creator's device.
    public var from: Peer
    public var video: Bool
    public var title: String?
    /// Members, the creator included.
    public var memberCount: Int
    public var createdAt: Int64
    public var group: GroupCallState

    public init(
      callId: CallID, from: Peer, video: Bool, title: String? = nil, memberCount: Int, createdAt: Int64,
      group: GroupCallState
    ) {
      self.callId = callId
      self.from = from
      self.video = video
      self.title = title
      self.memberCount = memberCount
      self.createdAt = createdAt
      self.group = group
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(
        callId: "", from: Peer(userId: "", deviceId: ""), video: false, memberCount: 0, createdAt: 0,
        group: GroupCallState(wirePlaceholder: WirePlaceholder()))
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.integer("createdAt", &createdAt, 0...Int64.max)
      try c.object("from", &from)
      try c.object("group", &group)
      try c.integer("memberCount", &memberCount, 0...Int64(Int32.max))
      try c.string("title", &title, .title)
      try c.bool("video", &video)
    }
  }

  /// `group-update`: `{callId, group}`: the participant list changed.
  public struct GroupUpdate: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var group: GroupCallState

    public init(callId: CallID, group: GroupCallState) {
      self.callId = callId
      self.group = group
    }

    public init(wirePlaceholder _: WirePlaceholder) {
      self.init(callId: "", group: GroupCallState(wirePlaceholder: WirePlaceholder()))
    }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("group", &group)
    }
  }

  /// `group-media`: `{callId, sfu, url?, token?}`: how the joined device reaches the media.
  /// Janus: offer the `publisher` stream now. LiveKit: connect to `url` with `token`.
  public struct GroupMedia: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var sfu: SFUKind
    public var url: String?
    public var token: String?
    /// Janus: the device's request for one subscriber connection was granted (20.9); the
    /// others' media comes as `group-offer`s of the stream `subscriber`.
    public var multistream: Bool
    /// Janus: `connection` to a device already in the call, whose call another server node took
    /// over with a new SFU room (20.11): every connection of the call is gone; publish again
    /// from a fresh one (an offer with `restart: connection`), and take the others' streams as
    /// new offers.
    public var restart: GroupRestart?

    public init(
      callId: CallID, sfu: SFUKind, url: String? = nil, token: String? = nil, multistream: Bool = false,
      restart: GroupRestart? = nil
    ) {
      self.callId = callId
      self.sfu = sfu
      self.url = url
      self.token = token
      self.multistream = multistream
      self.restart = restart
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", sfu: .janus) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.flag("multistream", &multistream)
      try c.enumeration("restart", &restart)
      try c.enumeration("sfu", &sfu)
      try c.string("token", &token, .sfuCredential)
      try c.string("url", &url, .sfuCredential)
    }
  }

  /// `group-offer` / `group-answer`: `{callId, stream, sdp, from?}`. An offer opens a stream
  /// carrying `from`'s media; the answer answers the device's `publisher` offer.
  public struct GroupDescription: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var stream: String
    public var sdp: String
    /// Whose media the offered stream carries.
    public var from: Peer?
    /// The subscriber connection's offer (20.9): whose media each live m-section carries.
    public var streams: [GroupStreamSection]?
    /// An offer that restarts a stream the device has (20.10): `ice`, new ICE credentials for its
    /// connection; `connection`, for a fresh connection that replaces it.
    public var restart: GroupRestart?

    public init(
      callId: CallID, stream: String, sdp: String, from: Peer? = nil, streams: [GroupStreamSection]? = nil,
      restart: GroupRestart? = nil
    ) {
      self.callId = callId
      self.stream = stream
      self.sdp = sdp
      self.from = from
      self.streams = streams
      self.restart = restart
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", stream: "", sdp: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.enumeration("restart", &restart)
      try c.string("sdp", &sdp, .sdp)
      try c.string("stream", &stream, .streamId)
      try c.objects("streams", &streams)
    }
  }

  /// `group-candidate`: `{callId, stream, candidate}`: the SFU's candidate for a stream (the same
  /// object as the client's).
  public typealias GroupCandidate = GroupStreamCandidate

  /// `group-stream-ended`: `{callId, stream}`: a stream the server offered is gone (its
  /// publisher left); close its connection.
  public typealias GroupStreamEnded = GroupCallStream

  /// `group-ended`: `{callId, reason, from?}`: the call is over for this device (its ring
  /// stopped, or the call ended). While the call lasts the member may still `group-join`.
  public struct GroupEnded: ServerCallMessageBody, Hashable {
    public var callId: CallID
    public var reason: GroupEndReason
    public var from: Peer?

    public init(callId: CallID, reason: GroupEndReason, from: Peer? = nil) {
      self.callId = callId
      self.reason = reason
      self.from = from
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", reason: .ended) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.object("from", &from)
      try c.enumeration("reason", &reason)
    }
  }
}
