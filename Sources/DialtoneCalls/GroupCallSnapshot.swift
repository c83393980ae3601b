import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A live group call as the journal keeps it for a cluster node that takes the call over (its
/// node died or drained): everything `GroupCallRouter.Call` holds but each join's negotiation
/// count, which starts again on the new node. Stored as JSON (`MessageCodec`), next to the
/// record the call would leave if it were interrupted.
package struct GroupCallSnapshot: WireCodable, Hashable {
  package struct Member: WireCodable, Hashable {
    package var userId: String
    package var name: String?
    package var state: GroupMemberState
    package var deviceId: String?
    package var joinedAt: Int64?
    package var leftAt: Int64?
    package var firstJoinedAt: Int64?
    package var inCallMs: Int64 = 0
    package var invitedBy: Peer?
    package var multistream = false
    package var ringDeadline: Int64?

    package init(wirePlaceholder _: WirePlaceholder) { self.init(userId: "", state: .left) }

    package init(userId: String, state: GroupMemberState) {
      self.userId = userId
      self.state = state
    }

    package mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
      try c.string("deviceId", &deviceId, .deviceId)
      try c.integer("firstJoinedAt", &firstJoinedAt, 0...Int64.max)
      try c.integer("inCallMs", &inCallMs, 0...Int64.max)
      try c.object("invitedBy", &invitedBy)
      try c.integer("joinedAt", &joinedAt, 0...Int64.max)
      try c.integer("leftAt", &leftAt, 0...Int64.max)
      try c.flag("multistream", &multistream)
      try c.string("name", &name, .name)
      try c.integer("ringDeadline", &ringDeadline, 0...Int64.max)
      try c.enumeration("state", &state)
      try c.string("userId", &userId, .userId)
    }
  }

  package var callId: CallID
  package var createdAt: Int64
  package var creator: Peer
  package var members: [Member]
  package var phase: GroupPhase
  package var room: String?
  package var silenced: [String]
  package var title: String?
  package var video: Bool

  package init(wirePlaceholder _: WirePlaceholder) {
    self.init(
      callId: "", createdAt: 0, creator: Peer(userId: "", deviceId: ""), members: [], phase: .ringing, room: nil,
      silenced: [], title: nil, video: false)
  }

  package init(
    callId: CallID, createdAt: Int64, creator: Peer, members: [Member], phase: GroupPhase, room: String?,
    silenced: [String], title: String?, video: Bool
  ) {
    self.callId = callId
    self.createdAt = createdAt
    self.creator = creator
    self.members = members
    self.phase = phase
    self.room = room
    self.silenced = silenced
    self.title = title
    self.video = video
  }

  package mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.string("callId", &callId, .callId)
    try c.integer("createdAt", &createdAt, 0...Int64.max)
    try c.object("creator", &creator)
    try c.objects("members", &members)
    try c.enumeration("phase", &phase)
    try c.string("room", &room, .roomName)
    try c.names("silenced", &silenced, .userId)
    try c.string("title", &title, .title)
    try c.bool("video", &video)
  }
}

/// A live group call read back from the shared journal, with the epoch of its ownership (raised
/// by the take-over that read it: `LiveCallStore.takeOverGroupCalls`).
package struct StoredGroupCall: Sendable, Equatable {
  package var snapshot: GroupCallSnapshot
  package var epoch: Int64

  package init(snapshot: GroupCallSnapshot, epoch: Int64 = 1) {
    self.snapshot = snapshot
    self.epoch = epoch
  }
}

extension GroupCallRouter.Call {
  package var snapshot: GroupCallSnapshot {
    GroupCallSnapshot(
      callId: id, createdAt: createdAt.millisecondsSince1970, creator: creator.peer,
      members: members.map { member in
        var stored = GroupCallSnapshot.Member(userId: member.userId, state: member.state)
        stored.name = member.name
        stored.deviceId = member.deviceId
        stored.joinedAt = member.joinedAt?.millisecondsSince1970
        stored.leftAt = member.leftAt?.millisecondsSince1970
        stored.firstJoinedAt = member.firstJoinedAt?.millisecondsSince1970
        stored.inCallMs = Int64((member.inCall * 1000).rounded())
        stored.invitedBy = member.invitedBy
        stored.multistream = member.multistream
        stored.ringDeadline = member.ringDeadline?.millisecondsSince1970
        return stored
      },
      phase: phase, room: room, silenced: silenced.sorted(), title: title, video: video)
  }

  package init(restoring s: GroupCallSnapshot) {
    self.init(
      id: s.callId, creator: Identity(userId: s.creator.userId, deviceId: s.creator.deviceId, name: s.creator.name),
      title: s.title, room: s.room, video: s.video, createdAt: Date(milliseconds: s.createdAt), phase: s.phase,
      members: s.members.map { stored in
        GroupCallRouter.Member(
          userId: stored.userId, name: stored.name, state: stored.state, deviceId: stored.deviceId,
          joinedAt: stored.joinedAt.map { Date(milliseconds: $0) },
          leftAt: stored.leftAt.map { Date(milliseconds: $0) },
          firstJoinedAt: stored.firstJoinedAt.map { Date(milliseconds: $0) }, inCall: Double(stored.inCallMs) / 1000,
          invitedBy: stored.invitedBy, multistream: stored.multistream,
          ringDeadline: stored.ringDeadline.map { Date(milliseconds: $0) })
      })
    silenced = Set(s.silenced)
  }
}
