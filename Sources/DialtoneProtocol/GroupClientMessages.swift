/// The payloads of the client's group-call messages (docs/protocol.md, "Group calls").
extension ClientMessage {
  /// `group-create`: `{callId, members, video?, title?}`. The sender's device is the creator and
  /// joins at once; every member's devices ring.
  public struct GroupCreate: CallMessageBody, Hashable {
    public var callId: CallID
    /// The user ids to ring (the creator may be listed; it is not rung).
    public var members: [String]
    public var video: Bool
    public var title: String?
    /// The creator's device receives everyone on one subscriber connection (20.9).
    public var multistream: Bool

    public init(
      callId: CallID, members: [String], video: Bool = false, title: String? = nil, multistream: Bool = false
    ) {
      self.callId = callId
      self.members = members
      self.video = video
      self.title = title
      self.multistream = multistream
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", members: []) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.strings("members", &members, acceptSingle: false, nonEmpty: true)
      try c.flag("multistream", &multistream)
      try c.string("title", &title, .title)
      try c.bool("video", &video, absent: false)
    }
  }

  /// `group-join`: `{callId, multistream?}`. The sender's device joins the call.
  public struct GroupJoin: CallMessageBody, Hashable {
    public var callId: CallID
    /// The device receives everyone on one subscriber connection (20.9).
    public var multistream: Bool

    public init(callId: CallID, multistream: Bool = false) {
      self.callId = callId
      self.multistream = multistream
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.flag("multistream", &multistream)
    }
  }

  /// `group-invite`: `{callId, members}`. Rings more users into a call already under way.
  public struct GroupInvite: CallMessageBody, Hashable {
    public var callId: CallID
    /// The user ids to ring (members already rung or in the call are not rung again).
    public var members: [String]

    public init(callId: CallID, members: [String]) {
      self.callId = callId
      self.members = members
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", members: []) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.strings("members", &members, acceptSingle: false, nonEmpty: true)
    }
  }

  /// `group-remove`: `{callId, userId}`. The call's owner takes a member out of it.
  public struct GroupRemove: CallMessageBody, Hashable {
    public var callId: CallID
    public var userId: String

    public init(callId: CallID, userId: String) {
      self.callId = callId
      self.userId = userId
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", userId: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.string("userId", &userId, .userId)
    }
  }

  /// `room-join`: `{room, callId?, video?}`. Joins the live call of an app-defined room, or
  /// starts one (with `callId`, else one the server picks) when the room has none. Nobody rings.
  public struct RoomJoin: ClientMessageBody, Hashable {
    public var room: String
    public var callId: CallID?
    public var video: Bool
    /// The device receives everyone on one subscriber connection (20.9).
    public var multistream: Bool

    public init(room: String, callId: CallID? = nil, video: Bool = false, multistream: Bool = false) {
      self.room = room
      self.callId = callId
      self.video = video
      self.multistream = multistream
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(room: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.flag("multistream", &multistream)
      try c.string("room", &room, .roomName)
      try c.bool("video", &video, absent: false)
    }
  }

  /// `group-offer` and `group-answer`: `{callId, stream, sdp}`. The client offers its own
  /// `publisher` stream and answers the server's offers of the others' streams.
  public struct GroupDescription: CallMessageBody, Hashable {
    public var callId: CallID
    public var stream: String
    public var sdp: String
    /// A `publisher` offer that restarts the stream (20.10): `ice` on its connection, or from a
    /// fresh `connection` that replaces it.
    public var restart: GroupRestart?

    public init(callId: CallID, stream: String, sdp: String, restart: GroupRestart? = nil) {
      self.callId = callId
      self.stream = stream
      self.sdp = sdp
      self.restart = restart
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", stream: "", sdp: "") }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.enumeration("restart", &restart)
      try c.string("sdp", &sdp, .sdp)
      try c.string("stream", &stream, .streamId)
    }
  }

  /// `group-restart`: `{callId, stream, restart}`. Asks the server for a new offer of a stream
  /// it offered (a `feed-…` stream or the `subscriber` stream) whose connection lost its path:
  /// with new ICE credentials for the same connection (`ice`), or for a fresh one (`connection`).
  public struct GroupStreamRestart: CallMessageBody, Hashable {
    public var callId: CallID
    public var stream: String
    public var restart: GroupRestart

    public init(callId: CallID, stream: String, restart: GroupRestart) {
      self.callId = callId
      self.stream = stream
      self.restart = restart
    }

    public init(wirePlaceholder _: WirePlaceholder) { self.init(callId: "", stream: "", restart: .ice) }

    public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("callId", &callId, .callId)
      try c.enumeration("restart", &restart)
      try c.string("stream", &stream, .streamId)
    }
  }

  /// `group-candidate`: `{callId, stream, candidate}`, the same object as the server's.
  public typealias GroupCandidate = GroupStreamCandidate

  /// `group-end-of-candidates`: `{callId, stream}`.
  public typealias GroupStream = GroupCallStream
}
