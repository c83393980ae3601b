/// The wire types of group calls (docs/protocol.md, "Group calls"): a call of up to
/// `Limits.maxGroupMembers` users whose media goes through an SFU.

/// Where a member of a group call stands (`GroupMember.state`).
public enum GroupMemberState: String, WireEnum {
  /// Rung, no device has reported alerting yet.
  case invited
  /// A device of the member is alerting (`group-ringing`).
  case ringing
  /// A device of the member is in the call.
  case joined
  /// The member declined the ring (they may still join while the call lasts).
  case declined
  /// The member's ring timed out (they may still join while the call lasts).
  case missed
  /// The member was in the call and left it (they may join again while the call lasts).
  case left
  /// The call's owner removed the member (`group-remove`): no longer a member, the call does
  /// not exist for them unless they are invited again.
  case removed

  /// An older client reads a removal as leaving.
  public static var lenientFallback: GroupMemberState? { .left }
}

/// The phase of a group call (`GroupCallState.state`).
public enum GroupPhase: String, WireEnum {
  /// Only the creator is in the call; the creator may still cancel it.
  case ringing
  /// Someone besides the creator has joined (a room by name is active from its first join).
  case active
  case ended
}

/// Why a group call ended, or ended for one device (`group-ended.reason`).
public enum GroupEndReason: String, WireEnum {
  /// The creator gave up before anyone joined.
  case cancelled
  /// The creator ended the call for everyone.
  case ended
  /// The last participant left.
  case completed
  /// Nobody answered: every member declined or missed the ring (to the creator).
  case unanswered
  /// Another device of the same user declined (this device stops ringing).
  case declinedElsewhere = "declined-elsewhere"
  /// Another device of the same user joined (this device stops ringing).
  case joinedElsewhere = "joined-elsewhere"
  /// This member's ring timed out (the member may still join while the call lasts).
  case missed
  /// The media server failed (died, restarted or refused the call): nobody's media flows.
  case mediaFailed = "media-failed"
  /// This device's socket dropped and did not come back within the grace window.
  case connectionLost = "connection-lost"
  /// The call's owner removed this member (`group-remove`).
  case removed
  /// History only: the server stopped while the call was live (group calls do not outlive a
  /// restart yet); the record ends at the server's last change to the call.
  case serverRestart = "server-restart"

  public static var lenientFallback: GroupEndReason? { .ended }
}

/// Which SFU carries a group call's media (`group-media.sfu`).
public enum SFUKind: String, WireEnum {
  /// The server proxies every negotiation: `group-offer` / `group-answer` / `group-candidate`.
  case janus
  /// The client connects to LiveKit itself with `url` and `token`.
  case livekit
}

/// One member of a group call.
public struct GroupMember: WireCodable, Hashable {
  public var userId: String
  public var state: GroupMemberState
  /// The device that is (or was last) in the call.
  public var deviceId: String?
  public var name: String?
  /// When the member last joined / left, ms since the Unix epoch.
  public var joinedAt: Int64?
  public var leftAt: Int64?

  public init(
    userId: String, state: GroupMemberState, deviceId: String? = nil, name: String? = nil, joinedAt: Int64? = nil,
    leftAt: Int64? = nil
  ) {
    self.userId = userId
    self.state = state
    self.deviceId = deviceId
    self.name = name
    self.joinedAt = joinedAt
    self.leftAt = leftAt
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", state: .invited) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("deviceId", &deviceId, .deviceId)
    try c.integer("joinedAt", &joinedAt, 0...Int64.max)
    try c.integer("leftAt", &leftAt, 0...Int64.max)
    try c.string("name", &name, .name)
    try c.enumeration("state", &state)
    try c.string("userId", &userId, .userId)
  }
}

/// The live state of a group call: in `group-update`, and in the `ack` of group requests.
public struct GroupCallState: WireCodable, Hashable {
  public var callId: CallID
  public var creatorId: String
  public var title: String?
  /// Set for a room joined by name (`room-join`).
  public var room: String?
  public var video: Bool
  public var state: GroupPhase
  public var createdAt: Int64
  public var endedAt: Int64?
  public var endReason: GroupEndReason?
  /// Every member, the creator included, in the order they were added.
  public var members: [GroupMember]

  public init(
    callId: CallID, creatorId: String, title: String? = nil, room: String? = nil, video: Bool, state: GroupPhase,
    createdAt: Int64, endedAt: Int64? = nil, endReason: GroupEndReason? = nil, members: [GroupMember]
  ) {
    self.callId = callId
    self.creatorId = creatorId
    self.title = title
    self.room = room
    self.video = video
    self.state = state
    self.createdAt = createdAt
    self.endedAt = endedAt
    self.endReason = endReason
    self.members = members
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", creatorId: "", video: false, state: .ended, createdAt: 0, members: [])
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("callId", &callId, .callId)
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.string("creatorId", &creatorId, .userId)
    try c.enumeration("endReason", &endReason)
    try c.integer("endedAt", &endedAt, 0...Int64.max)
    try c.objects("members", &members)
    try c.string("room", &room, .roomName)
    try c.enumeration("state", &state)
    try c.string("title", &title, .title)
    try c.bool("video", &video)
  }

  public func member(_ userId: String) -> GroupMember? { members.first { $0.userId == userId } }
}

/// One participant of a finished group call, as history keeps it.
public struct GroupParticipantRecord: WireCodable, Hashable {
  public var userId: String
  /// The member's last state: `joined` never appears (everyone has left when a call ends).
  public var outcome: GroupMemberState
  public var deviceId: String?
  /// The first join, ms since the Unix epoch.
  public var joinedAt: Int64?
  /// Time spent in the call, summed over every join.
  public var durationMs: Int64?

  public init(
    userId: String, outcome: GroupMemberState, deviceId: String? = nil, joinedAt: Int64? = nil,
    durationMs: Int64? = nil
  ) {
    self.userId = userId
    self.outcome = outcome
    self.deviceId = deviceId
    self.joinedAt = joinedAt
    self.durationMs = durationMs
  }

  public init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", outcome: .left) }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("deviceId", &deviceId, .deviceId)
    try c.integer("durationMs", &durationMs, 0...Int64.max)
    try c.integer("joinedAt", &joinedAt, 0...Int64.max)
    try c.enumeration("outcome", &outcome)
    try c.string("userId", &userId, .userId)
  }
}

/// A finished group call (`GET /v1/group-calls`).
public struct GroupCallRecord: WireCodable, Hashable {
  public var callId: CallID
  public var creatorId: String
  public var title: String?
  public var room: String?
  public var video: Bool
  public var createdAt: Int64
  public var endedAt: Int64
  public var endReason: GroupEndReason
  public var participants: [GroupParticipantRecord]
  /// `true` only in the history of a member whose block of the creator silenced the call (a
  /// server that keeps such calls in the blocker's history); absent otherwise.
  public var blocked: Bool?

  public init(
    callId: CallID, creatorId: String, title: String? = nil, room: String? = nil, video: Bool, createdAt: Int64,
    endedAt: Int64, endReason: GroupEndReason, participants: [GroupParticipantRecord], blocked: Bool? = nil
  ) {
    self.callId = callId
    self.creatorId = creatorId
    self.title = title
    self.room = room
    self.video = video
    self.createdAt = createdAt
    self.endedAt = endedAt
    self.endReason = endReason
    self.participants = participants
    self.blocked = blocked
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(callId: "", creatorId: "", video: false, createdAt: 0, endedAt: 0, endReason: .ended, participants: [])
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.bool("blocked", &blocked)
    try c.string("callId", &callId, .callId)
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.string("creatorId", &creatorId, .userId)
    try c.enumeration("endReason", &endReason)
    try c.integer("endedAt", &endedAt, 0...Int64.max)
    try c.objects("participants", &participants)
    try c.string("room", &room, .roomName)
    try c.string("title", &title, .title)
    try c.bool("video", &video)
  }
}

/// `GET /v1/group-calls`: the caller's finished group calls, newest first.
public typealias GroupCallHistoryResponse = HistoryResponse<GroupCallRecord>

extension WireText {
  /// `room` (1...128).
  public static let roomName = WireText(maxBytes: Limits.maxRoomNameBytes)
  /// `title` (0...256).
  public static let title = WireText(minBytes: 0, maxBytes: Limits.maxGroupTitleBytes)
  /// `stream` (1...64).
  public static let streamId = WireText(maxBytes: Limits.maxStreamIDBytes)
  /// LiveKit `url` and `token`.
  public static let sfuCredential = WireText(maxBytes: Limits.maxTokenBytes)
}

extension Limits {
  /// `room-join.room` (1...128).
  public static let maxRoomNameBytes = 128
  /// `group-create.title` (0...256).
  public static let maxGroupTitleBytes = 256
  /// `stream` in the group negotiation messages (1...64).
  public static let maxStreamIDBytes = 64
  /// The most members `group-create` may name (the server's ring limit may be lower).
  public static let maxGroupMembers = 64
}
