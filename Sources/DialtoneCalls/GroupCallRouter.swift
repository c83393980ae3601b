import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Who may ring more people into a running group call (`group-invite`, `--group-invite-policy`).
public enum GroupInvitePolicy: String, Sendable, CaseIterable {
  /// Any member whose device is in the call.
  case members
  /// Only the call's owner (its creator), from a device in the call.
  case owner
}

/// The server-side state machine of group calls, whose media goes through an SFU.
///
///     ringing ──a member joins──▶ active ──creator ends · last one leaves · SFU fails──▶ ended
///        │
///        └── creator ends (cancelled) · everyone declined or missed (unanswered) · SFU fails ──▶ ended
///
/// Per member: invited ─group-ringing─▶ ringing ─join─▶ joined ─leave / grace─▶ left, and
/// invited/ringing ─decline─▶ declined, ─ring timeout─▶ missed. Declined, missed and left
/// members may join again while the call lasts. One device per user is in the call.
///
/// Mid-call, `group-invite` rings more users (who may invite: `Settings.invitePolicy`) and the
/// owner's `group-remove` takes a member out: *removed* is no member any more, the call does not
/// exist for them (as for a silenced member) until the owner invites them again. The owner is the
/// creator, of a room too (who started its call); the owner may also end the call for everyone.
///
/// A member who blocks the creator is *silenced*: listed like anyone invited (and missed at the
/// ring timeout, as if nobody answered), but none of their devices is rung, pushed or told of the
/// call, and for them it does not exist (`get-group`, `group-join`… answer `not-found`).
///
/// A user `group-invite` would ring who blocks the inviter (or the creator) is silenced the same way.
///
/// A pure value like `CallRouter`: every input returns the reply and the effects (messages,
/// timers, SFU commands, events) that the hub applies.
package struct GroupCallRouter {
  package typealias InvitePolicy = GroupInvitePolicy

  package struct Settings: Sendable {
    /// Most members of a call ringing at once (by `group-create` or `group-invite`).
    package var ringLimit = 16
    /// Most members a call may hold (a room by name grows as people join).
    package var maxMembers = Limits.maxGroupMembers
    /// Live group calls (rooms included) one user may have started: each holds an SFU room.
    package var maxLiveCallsPerUser = 4
    /// Negotiation messages (offers, answers, candidates) a device may send per join: each
    /// becomes a request to the SFU.
    package var maxSignalsPerJoin = 1024
    package var ringTimeout: Duration = .seconds(45)
    package var reconnectGrace: Duration = .seconds(30)
    package var endedRetention: Duration = .seconds(600)
    package var invitePolicy = InvitePolicy.members

    package init(
      ringLimit: Int = 16, maxMembers: Int = Limits.maxGroupMembers, maxLiveCallsPerUser: Int = 4,
      maxSignalsPerJoin: Int = 1024, ringTimeout: Duration = .seconds(45), reconnectGrace: Duration = .seconds(30),
      endedRetention: Duration = .seconds(600), invitePolicy: InvitePolicy = .members
    ) {
      self.ringLimit = ringLimit
      self.maxMembers = maxMembers
      self.maxLiveCallsPerUser = maxLiveCallsPerUser
      self.maxSignalsPerJoin = maxSignalsPerJoin
      self.ringTimeout = ringTimeout
      self.reconnectGrace = reconnectGrace
      self.endedRetention = endedRetention
      self.invitePolicy = invitePolicy
    }
  }

  package struct Member {
    package let userId: String
    package var name: String?
    package var state: GroupMemberState
    package var deviceId: String?
    package var joinedAt: Date?
    package var leftAt: Date?
    package var firstJoinedAt: Date?
    /// Time in the call over the member's earlier joins.
    package var inCall: TimeInterval = 0
    /// Negotiation messages relayed for the device since it joined.
    package var signals = 0
    /// The device whose `group-invite` rang the member last (nil: rung by the create).
    package var invitedBy: Peer?
    /// The joined device asked for one subscriber connection (20.9): kept so that a node taking
    /// the call over joins it to the SFU the same way.
    package var multistream = false
    /// When the member's current ring times out (while invited or ringing).
    package var ringDeadline: Date?
  }

  package struct Call {
    package let id: CallID
    package let creator: Identity
    package let title: String?
    package let room: String?
    package let video: Bool
    package let createdAt: Date
    package var phase: GroupPhase
    package var endedAt: Date?
    package var endReason: GroupEndReason?
    package var members: [Member]
    /// Members who block the creator (decided when the call was created), or, for those a
    /// `group-invite` rang, the creator or the inviter.
    package var silenced: Set<String> = []

    package func index(of userId: String) -> Int? { members.firstIndex { $0.userId == userId } }
    /// A member's index, unless the call must not exist for that user (silenced, or removed).
    package func visibleIndex(of userId: String) -> Int? {
      guard !silenced.contains(userId), let i = index(of: userId), members[i].state != .removed else { return nil }
      return i
    }
    package func isJoinedDevice(_ who: Identity) -> Bool {
      members.contains { $0.userId == who.userId && $0.state == .joined && $0.deviceId == who.deviceId }
    }
    package var joinedCount: Int { members.count { $0.state == .joined } }
    /// Members, the removed not counted.
    package var memberCount: Int { members.count { $0.state != .removed } }

    /// The call is over for everyone: those in it have left (their time counted), those still
    /// ringing missed it.
    package mutating func closeMembers(at now: Date) {
      for i in members.indices {
        switch members[i].state {
        case .joined:
          if let joinedAt = members[i].joinedAt { members[i].inCall += now.timeIntervalSince(joinedAt) }
          members[i].state = .left
          members[i].leftAt = now
        case .invited, .ringing:
          members[i].state = .missed
        case .declined, .missed, .left, .removed:
          break
        }
      }
    }
  }

  package typealias Outcome = CallRouter.Outcome

  package let settings: Settings
  package private(set) var calls: [CallID: Call] = [:]
  /// Live calls of rooms joined by name.
  private var rooms: [String: CallID] = [:]
  private var endedOrder: [(CallID, Date)] = []

  package init(settings: Settings = Settings()) { self.settings = settings }

  package func knows(_ callId: CallID) -> Bool { calls[callId] != nil }

  /// The members a block kept the call from (kept out of their own history).
  package func silencedMembers(of callId: CallID) -> Set<String> { calls[callId]?.silenced ?? [] }

  /// Group calls not yet ended.
  package var liveCallCount: Int { calls.values.reduce(0) { $0 + ($1.phase == .ended ? 0 : 1) } }

  /// The record a live call would leave if the server stopped now (`serverRestart`): members
  /// in the call count as having left, members still ringing as having missed it.
  package func recordIfInterrupted(_ callId: CallID, now: Date) -> GroupCallRecord? {
    guard var call = calls[callId], call.phase != .ended else { return nil }
    call.closeMembers(at: now)
    call.endedAt = now
    call.endReason = .serverRestart
    return record(of: call)
  }

  // MARK: - Requests

  /// `blocks(user, other)`: whether `user` blocks `other` (consulted for the users `group-create`
  /// and `group-invite` ring).
  package mutating func handle(
    _ message: ClientMessage, id: String, from who: Identity, now: Date,
    blocks: (_ user: String, _ other: String) -> Bool = { _, _ in false }
  ) -> Outcome {
    pruneEnded(now: now)
    switch message {
    case .groupCreate(let m): return create(m, id: id, from: who, now: now, blockedBy: { blocks($0, who.userId) })
    case .groupInvite(let m): return invite(m, id: id, from: who, now: now, blocks: blocks)
    case .groupRemove(let m): return remove(m, id: id, from: who, now: now)
    case .roomJoin(let m): return joinRoom(m, id: id, from: who, now: now)
    case .groupRinging(let m): return ringing(m.callId, id: id, from: who)
    case .groupDecline(let m): return decline(m.callId, id: id, from: who, now: now)
    case .groupJoin(let m): return join(m.callId, id: id, from: who, now: now, multistream: m.multistream)
    case .groupLeave(let m): return leave(m.callId, id: id, from: who, now: now)
    case .groupEnd(let m): return end(m.callId, id: id, from: who, now: now)
    case .getGroup(let m):
      guard let call = calls[m.callId], call.visibleIndex(of: who.userId) != nil else { return notFound(id, m.callId) }
      return Outcome(reply: ack(id, call))
    case .groupOffer(let m): return relay(message, m.callId, id: id, from: who)
    case .groupAnswer(let m): return relay(message, m.callId, id: id, from: who)
    case .groupCandidate(let m): return relay(message, m.callId, id: id, from: who)
    case .groupEndOfCandidates(let m): return relay(message, m.callId, id: id, from: who)
    case .groupRestart(let m): return relay(message, m.callId, id: id, from: who)
    default:
      return Outcome(reply: .error(.init(replyTo: id, code: .internal, message: "not a group call message")))
    }
  }

  private func tooManyLiveCalls(of userId: String) -> Bool {
    calls.values.count { $0.creator.userId == userId && $0.phase != .ended } >= settings.maxLiveCallsPerUser
  }

  private mutating func create(
    _ m: ClientMessage.GroupCreate, id: String, from who: Identity, now: Date, blockedBy: (String) -> Bool
  ) -> Outcome {
    var invited: [String] = []
    for userId in m.members where userId != who.userId && !invited.contains(userId) {
      guard !userId.isEmpty, userId.utf8.count <= Limits.maxUserIDBytes else {
        return error(id, m.callId, .badRequest, "\"members\" holds an invalid user id")
      }
      invited.append(userId)
      guard invited.count <= settings.ringLimit else {
        return error(id, m.callId, .tooLarge, "a group call rings at most \(settings.ringLimit) members")
      }
    }
    guard !invited.isEmpty else {
      return error(id, m.callId, .badRequest, "\"members\" must name someone besides yourself")
    }
    if let existing = calls[m.callId] {
      // A retry of the same create is acknowledged again.
      if existing.creator == who, existing.phase != .ended { return Outcome(reply: ack(id, existing)) }
      return error(id, m.callId, .conflict, "callId is already used by another call")
    }
    guard !tooManyLiveCalls(of: who.userId) else {
      return error(id, m.callId, .limitExceeded, "at most \(settings.maxLiveCallsPerUser) live group calls per user")
    }
    var creator = Member(userId: who.userId, name: who.name, state: .joined, deviceId: who.deviceId)
    creator.joinedAt = now
    creator.firstJoinedAt = now
    creator.multistream = m.multistream
    let ringDeadline = now.addingTimeInterval(settings.ringTimeout.seconds)
    var call = Call(
      id: m.callId, creator: who, title: m.title, room: nil, video: m.video, createdAt: now, phase: .ringing,
      members: [creator] + invited.map { Member(userId: $0, state: .invited, ringDeadline: ringDeadline) })
    call.silenced = Set(invited.filter(blockedBy))
    calls[call.id] = call
    var effects: [CallEffect] = [
      .sfu(.open(callId: call.id, video: call.video)),
      .sfu(.join(callId: call.id, participant: who, multistream: m.multistream)),
    ]
    for userId in invited {
      // A silenced member still times out, so the creator sees what an unanswered ring looks like.
      effects.append(
        .schedule(CallTimer(callId: call.id, kind: .memberRing(userId: userId)), after: settings.ringTimeout))
      guard !call.silenced.contains(userId) else { continue }
      effects += ring(call, userId, by: who.peer, now: now)
    }
    return Outcome(reply: ack(id, call), effects: effects)
  }

  /// The ring of one member who is not silenced: the invite to every device, and the push (whose
  /// `createdAt` is when this ring started, so that a device can tell a stale push).
  private func ring(_ call: Call, _ userId: String, by inviter: Peer, now: Date) -> [CallEffect] {
    [
      .send(inviteMessage(call, from: inviter), to: .user(userId: userId, exceptDevice: nil)),
      .external(
        .groupRinging(
          GroupRing(
            callId: call.id, creator: inviter, memberId: userId, title: call.title,
            memberCount: call.memberCount, video: call.video, createdAt: now))),
    ]
  }

  /// `group-invite`: rings more users into a live call. Members already rung or in the call are
  /// left as they are; members who declined, missed or left are rung again; a removed member
  /// only by the owner. At most the ring limit ring at once, at most `maxMembers` members.
  private mutating func invite(
    _ m: ClientMessage.GroupInvite, id: String, from who: Identity, now: Date,
    blocks: (_ user: String, _ other: String) -> Bool
  ) -> Outcome {
    guard var call = calls[m.callId], call.visibleIndex(of: who.userId) != nil else { return notFound(id, m.callId) }
    guard call.phase != .ended else { return invalidState(id, call) }
    guard call.isJoinedDevice(who) else {
      return error(id, call.id, .invalidState, "only a device in the call may invite")
    }
    if settings.invitePolicy == .owner, who.userId != call.creator.userId {
      return error(id, call.id, .forbidden, "only the call's owner may invite on this server")
    }
    var toRing: [String] = []
    var newcomers = 0
    for userId in m.members where userId != who.userId && !toRing.contains(userId) {
      guard !userId.isEmpty, userId.utf8.count <= Limits.maxUserIDBytes else {
        return error(id, call.id, .badRequest, "\"members\" holds an invalid user id")
      }
      if let i = call.index(of: userId) {
        switch call.members[i].state {
        case .invited, .ringing, .joined:
          continue  // rung already, or in the call
        case .removed:
          guard who.userId == call.creator.userId else {
            return error(id, call.id, .forbidden, "\(userId) was removed: only the call's owner may invite them again")
          }
          newcomers += 1
        case .declined, .missed, .left:
          // A visible member who blocks the inviter is silently not rung again.
          if !call.silenced.contains(userId), blocks(userId, who.userId) { continue }
        }
      } else {
        newcomers += 1
      }
      toRing.append(userId)
    }
    guard m.members.contains(where: { $0 != who.userId }) else {
      return error(id, call.id, .badRequest, "\"members\" must name someone besides yourself")
    }
    let alreadyRinging = call.members.count { [.invited, .ringing].contains($0.state) }
    guard alreadyRinging + toRing.count <= settings.ringLimit else {
      return error(id, call.id, .tooLarge, "a group call rings at most \(settings.ringLimit) members at once")
    }
    guard call.memberCount + newcomers <= settings.maxMembers else {
      return error(id, call.id, .tooLarge, "a group call holds at most \(settings.maxMembers) members")
    }
    guard !toRing.isEmpty else { return Outcome(reply: ack(id, call)) }
    var effects: [CallEffect] = []
    for userId in toRing {
      let i: Int
      if let existing = call.index(of: userId) {
        i = existing
        if call.members[i].state == .removed || call.silenced.contains(userId) {
          // Not shown the call so far: whether it is now depends on who rings this time.
          call.silenced.remove(userId)
          if blocks(userId, who.userId) || blocks(userId, call.creator.userId) { call.silenced.insert(userId) }
        }
      } else {
        call.members.append(Member(userId: userId, state: .invited))
        i = call.members.count - 1
        if blocks(userId, who.userId) || blocks(userId, call.creator.userId) { call.silenced.insert(userId) }
      }
      call.members[i].state = .invited
      call.members[i].invitedBy = who.peer
      call.members[i].ringDeadline = now.addingTimeInterval(settings.ringTimeout.seconds)
    }
    calls[call.id] = call
    for userId in toRing {
      effects.append(
        .schedule(CallTimer(callId: call.id, kind: .memberRing(userId: userId)), after: settings.ringTimeout))
      guard !call.silenced.contains(userId) else { continue }
      effects += ring(call, userId, by: who.peer, now: now)
    }
    effects += updates(call)
    return Outcome(reply: ack(id, call), effects: effects)
  }

  /// `group-remove`: the owner takes a member out of the call. A device of theirs in the call
  /// loses its media at once; every device of theirs is told (`removed`); the others see it in
  /// `group-update`. The removed user is no member any more: the call's id lets them in no more.
  private mutating func remove(_ m: ClientMessage.GroupRemove, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[m.callId], call.visibleIndex(of: who.userId) != nil else { return notFound(id, m.callId) }
    guard call.phase != .ended else { return invalidState(id, call) }
    guard who.userId == call.creator.userId else {
      return error(id, call.id, .forbidden, "only the call's owner (its creator) may remove members")
    }
    guard m.userId != who.userId else {
      return error(id, call.id, .badRequest, "the owner cannot remove themselves: send group-leave or group-end")
    }
    guard let i = call.index(of: m.userId), call.members[i].state != .removed else {
      return error(id, call.id, .notFound, "\(m.userId) is not a member of this call")
    }
    let member = call.members[i]
    var effects: [CallEffect] = []
    switch member.state {
    case .joined:
      if let joinedAt = member.joinedAt { call.members[i].inCall += now.timeIntervalSince(joinedAt) }
      call.members[i].leftAt = now
      if let deviceId = member.deviceId {
        effects.append(
          .sfu(.leave(callId: call.id, participant: Identity(userId: m.userId, deviceId: deviceId, name: nil))))
        effects.append(.cancel(CallTimer(callId: call.id, kind: .grace(userId: m.userId, deviceId: deviceId))))
      }
    case .invited, .ringing:
      effects += stopRing(call, m.userId)
    case .declined, .missed, .left, .removed:
      break
    }
    call.members[i].state = .removed
    if !call.silenced.contains(m.userId) {
      effects.append(
        .send(
          .groupEnded(.init(callId: call.id, reason: .removed, from: who.peer)),
          to: .user(userId: m.userId, exceptDevice: nil)))
    }
    calls[call.id] = call
    let stillRinging = call.members.contains { [.invited, .ringing].contains($0.state) }
    if call.joinedCount == 0 || (call.phase == .ringing && !stillRinging) {
      // Nobody left in the call, or nobody left to ring it: the owner's removal ends it.
      effects += finish(&call, call.phase == .ringing ? .cancelled : .completed, now: now, from: who)
    } else {
      effects += updates(call)
    }
    return Outcome(reply: ack(id, call), effects: effects)
  }

  private mutating func joinRoom(_ m: ClientMessage.RoomJoin, id: String, from who: Identity, now: Date) -> Outcome {
    if let callId = rooms[m.room], calls[callId] != nil {
      return join(callId, id: id, from: who, now: now, byRoomName: true, multistream: m.multistream)
    }
    let callId = m.callId ?? CallIDRules.generate()
    if calls[callId] != nil { return error(id, callId, .conflict, "callId is already used by another call") }
    guard !tooManyLiveCalls(of: who.userId) else {
      return error(id, callId, .limitExceeded, "at most \(settings.maxLiveCallsPerUser) live group calls per user")
    }
    var first = Member(userId: who.userId, name: who.name, state: .joined, deviceId: who.deviceId)
    first.joinedAt = now
    first.firstJoinedAt = now
    first.multistream = m.multistream
    let call = Call(
      id: callId, creator: who, title: nil, room: m.room, video: m.video, createdAt: now, phase: .active,
      members: [first])
    calls[callId] = call
    rooms[m.room] = callId
    return Outcome(
      reply: ack(id, call),
      effects: [
        .sfu(.open(callId: callId, video: m.video)),
        .sfu(.join(callId: callId, participant: who, multistream: m.multistream)),
      ])
  }

  private mutating func ringing(_ callId: CallID, id: String, from who: Identity) -> Outcome {
    guard var call = calls[callId], let i = call.visibleIndex(of: who.userId) else { return notFound(id, callId) }
    guard call.phase != .ended else { return invalidState(id, call) }
    guard call.members[i].state == .invited else { return Outcome(reply: ack(id, call)) }
    call.members[i].state = .ringing
    calls[callId] = call
    return Outcome(reply: ack(id, call), effects: updates(call))
  }

  private mutating func decline(_ callId: CallID, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[callId], let i = call.visibleIndex(of: who.userId) else { return notFound(id, callId) }
    guard call.phase != .ended, [.invited, .ringing].contains(call.members[i].state) else {
      return invalidState(id, call)
    }
    call.members[i].state = .declined
    var effects = stopRing(call, who.userId)
    effects.append(
      .send(
        .groupEnded(.init(callId: callId, reason: .declinedElsewhere, from: who.peer)),
        to: .user(userId: who.userId, exceptDevice: who.deviceId)))
    calls[callId] = call
    effects += settle(&call, now: now)
    return Outcome(reply: ack(id, call), effects: effects)
  }

  /// `byRoomName`: the device named the room (`room-join`). Only then may a user who is not a
  /// member yet come in: a room's call id lets members back in, never anyone else (18.2).
  /// `multistream`: the device asked for one subscriber connection (20.9).
  private mutating func join(
    _ callId: CallID, id: String, from who: Identity, now: Date, byRoomName: Bool = false, multistream: Bool = false
  ) -> Outcome {
    guard var call = calls[callId], !call.silenced.contains(who.userId) else { return notFound(id, callId) }
    var i = call.index(of: who.userId)
    if i == nil, byRoomName, call.room != nil, call.phase != .ended {
      // A room by name takes anyone who knows its name, up to the member limit.
      guard call.memberCount < settings.maxMembers else {
        return error(id, callId, .tooLarge, "the room is full (\(settings.maxMembers) members)")
      }
      call.members.append(Member(userId: who.userId, name: who.name, state: .left))
      i = call.members.count - 1
    }
    guard let i else { return notFound(id, callId) }
    if call.members[i].state == .removed {
      // No member any more: by id the call does not exist for them; by the room's name it says why.
      guard byRoomName, call.phase != .ended else { return notFound(id, callId) }
      return error(id, callId, .forbidden, "you were removed from this room's call")
    }
    guard call.phase != .ended else { return invalidState(id, call) }
    let member = call.members[i]
    if member.state == .joined {
      if member.deviceId == who.deviceId { return Outcome(reply: ack(id, call)) }
      return error(id, callId, .invalidState, "already in the call on another device")
    }
    let wasRinging = [.invited, .ringing].contains(member.state)
    call.members[i].state = .joined
    call.members[i].deviceId = who.deviceId
    call.members[i].name = who.name ?? member.name
    call.members[i].joinedAt = now
    call.members[i].signals = 0
    call.members[i].leftAt = nil
    call.members[i].multistream = multistream
    call.members[i].ringDeadline = nil
    if call.members[i].firstJoinedAt == nil { call.members[i].firstJoinedAt = now }
    if call.phase == .ringing, who.userId != call.creator.userId { call.phase = .active }
    calls[callId] = call
    var effects: [CallEffect] = wasRinging ? stopRing(call, who.userId) : []
    effects.append(
      .send(
        .groupEnded(.init(callId: callId, reason: .joinedElsewhere, from: who.peer)),
        to: .user(userId: who.userId, exceptDevice: who.deviceId)))
    effects.append(.sfu(.join(callId: callId, participant: who, multistream: multistream)))
    effects += updates(call)
    return Outcome(reply: ack(id, call), effects: effects)
  }

  private mutating func leave(_ callId: CallID, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[callId], call.visibleIndex(of: who.userId) != nil else { return notFound(id, callId) }
    guard call.phase != .ended, call.isJoinedDevice(who) else { return invalidState(id, call) }
    let effects = depart(&call, who, now: now)
    return Outcome(reply: ack(id, call), effects: effects)
  }

  private mutating func end(_ callId: CallID, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[callId], call.visibleIndex(of: who.userId) != nil else { return notFound(id, callId) }
    guard call.phase != .ended else { return invalidState(id, call) }
    guard who.userId == call.creator.userId else {
      return error(id, callId, .forbidden, "only the call's owner (its creator) may end the call for everyone")
    }
    let effects = finish(&call, call.phase == .ringing ? .cancelled : .ended, now: now, from: who)
    return Outcome(reply: ack(id, call), effects: effects)
  }

  private mutating func relay(_ message: ClientMessage, _ callId: CallID, id: String, from who: Identity) -> Outcome {
    guard var call = calls[callId], let i = call.visibleIndex(of: who.userId) else { return notFound(id, callId) }
    guard call.phase != .ended, call.isJoinedDevice(who) else { return invalidState(id, call) }
    guard call.members[i].signals < settings.maxSignalsPerJoin else {
      return error(
        id, callId, .limitExceeded, "too much negotiation in this call (\(settings.maxSignalsPerJoin) per join)")
    }
    call.members[i].signals += 1
    calls[callId] = call
    return Outcome(
      reply: .ack(.init(replyTo: id, callId: callId)),
      effects: [.sfu(.signal(callId: callId, participant: who, message: message))])
  }

  // MARK: - Connections, timers and the SFU

  /// A device (re)connected: grace timers stop; a new session of a member still being rung
  /// gets the ring again.
  package func deviceConnected(_ who: Identity, newSession: Bool) -> [CallEffect] {
    var effects: [CallEffect] = []
    for call in calls.values where call.phase != .ended {
      guard let i = call.visibleIndex(of: who.userId) else { continue }
      let member = call.members[i]
      if call.isJoinedDevice(who) {
        effects.append(
          .cancel(CallTimer(callId: call.id, kind: .grace(userId: who.userId, deviceId: who.deviceId))))
      } else if newSession, [.invited, .ringing].contains(member.state) {
        effects.append(
          .send(
            inviteMessage(call, from: member.invitedBy ?? call.creator.peer),
            to: .device(userId: who.userId, deviceId: who.deviceId)))
      }
    }
    return effects
  }

  /// A device's socket dropped: the calls it is in get the grace window.
  package func deviceDisconnected(_ who: Identity) -> [CallEffect] {
    calls.values.filter { $0.phase != .ended && $0.isJoinedDevice(who) }.map {
      .schedule(
        CallTimer(callId: $0.id, kind: .grace(userId: who.userId, deviceId: who.deviceId)),
        after: settings.reconnectGrace)
    }
  }

  package mutating func timerFired(_ timer: CallTimer, now: Date) -> [CallEffect] {
    guard var call = calls[timer.callId], call.phase != .ended else { return [] }
    switch timer.kind {
    case .memberRing(let userId):
      guard let i = call.index(of: userId), [.invited, .ringing].contains(call.members[i].state) else { return [] }
      call.members[i].state = .missed
      calls[call.id] = call
      var effects: [CallEffect] =
        call.silenced.contains(userId)
        ? []
        : [
          .external(.groupRingStopped(callId: call.id, memberId: userId)),
          .send(.groupEnded(.init(callId: call.id, reason: .missed)), to: .user(userId: userId, exceptDevice: nil)),
        ]
      effects += settle(&call, now: now)
      return effects
    case .grace(let userId, let deviceId):
      let lost = Identity(userId: userId, deviceId: deviceId, name: nil)
      guard call.isJoinedDevice(lost) else { return [] }
      var effects = depart(&call, lost, now: now)
      effects.append(
        .send(
          .groupEnded(.init(callId: call.id, reason: .connectionLost)),
          to: .device(userId: userId, deviceId: deviceId)))
      return effects
    case .ring:
      return []
    }
  }

  /// The SFU lost the call (it died, restarted or refused): nobody's media flows, so it ends.
  package mutating func mediaFailed(_ callId: CallID, now: Date) -> [CallEffect] {
    guard var call = calls[callId], call.phase != .ended else { return [] }
    return finish(&call, .mediaFailed, now: now, from: nil)
  }

  /// The SFU saw a device leave its room (LiveKit's `participant_left`).
  package mutating func participantLeftMedia(_ callId: CallID, _ who: Identity, now: Date) -> [CallEffect] {
    guard var call = calls[callId], call.phase != .ended, call.isJoinedDevice(who) else { return [] }
    return depart(&call, who, now: now)
  }

  /// The SFU closed the room (LiveKit's `room_finished`).
  package mutating func roomFinished(_ callId: CallID, now: Date) -> [CallEffect] {
    guard var call = calls[callId], call.phase != .ended else { return [] }
    return finish(&call, call.phase == .ringing ? .cancelled : .completed, now: now, from: nil)
  }

  // MARK: - Taking calls over (a cluster)

  /// Runs a live call that another node ran (it died or drained), as the journal kept it.
  /// Nobody is rung again: members still ringing go on until their ring's deadline. The call's
  /// SFU side is made again here and every device in the call joins it afresh (`rejoin`: it
  /// publishes and subscribes again without leaving the call), with the reconnect grace to be
  /// seen (a device connected on any node cancels it). A call this router already runs is left
  /// as it is.
  package mutating func adopt(_ call: Call, now: Date) -> [CallEffect] {
    guard call.phase != .ended, calls[call.id].map({ $0.phase == .ended }) ?? true else { return [] }
    calls[call.id] = call
    endedOrder.removeAll { $0.0 == call.id }
    if let room = call.room { rooms[room] = call.id }
    var effects: [CallEffect] = [.sfu(.open(callId: call.id, video: call.video))]
    for member in call.members {
      switch member.state {
      case .joined:
        guard let deviceId = member.deviceId else { continue }
        let device = Identity(userId: member.userId, deviceId: deviceId, name: member.name)
        effects.append(.sfu(.rejoin(callId: call.id, participant: device, multistream: member.multistream)))
        effects.append(
          .schedule(
            CallTimer(callId: call.id, kind: .grace(userId: member.userId, deviceId: deviceId)),
            after: settings.reconnectGrace))
      case .invited, .ringing:
        let left = member.ringDeadline.map { max(0, $0.timeIntervalSince(now)) } ?? settings.ringTimeout.seconds
        effects.append(
          .schedule(
            CallTimer(callId: call.id, kind: .memberRing(userId: member.userId)),
            after: .milliseconds(Int64((left * 1000).rounded()))))
      case .declined, .missed, .left, .removed:
        break
      }
    }
    return effects
  }

  /// Stops running a call another node runs now (this node lost its lease): its timers here stop
  /// and its SFU side here is closed (the new owner made its own). Nothing is sent or recorded:
  /// the call goes on there.
  package mutating func relinquish(_ callId: CallID) -> [CallEffect] {
    guard let call = calls.removeValue(forKey: callId) else { return [] }
    if let room = call.room, rooms[room] == callId { rooms[room] = nil }
    endedOrder.removeAll { $0.0 == callId }
    guard call.phase != .ended else { return [] }
    var effects: [CallEffect] = []
    for member in call.members {
      switch member.state {
      case .joined:
        guard let deviceId = member.deviceId else { continue }
        effects.append(.cancel(CallTimer(callId: callId, kind: .grace(userId: member.userId, deviceId: deviceId))))
      case .invited, .ringing:
        effects.append(.cancel(CallTimer(callId: callId, kind: .memberRing(userId: member.userId))))
      case .declined, .missed, .left, .removed:
        break
      }
    }
    effects.append(.sfu(.close(callId: callId)))
    return effects
  }

  /// What the journal keeps of a live call for a node that takes it over (nil: ended or unknown).
  package func snapshot(of callId: CallID) -> GroupCallSnapshot? {
    guard let call = calls[callId], call.phase != .ended else { return nil }
    return call.snapshot
  }

  /// Whether `who` is the device in `callId` right now (SFU results for others are dropped).
  package func isJoined(_ who: Identity, in callId: CallID) -> Bool { calls[callId]?.isJoinedDevice(who) ?? false }

  package func state(_ callId: CallID, visibleTo who: Identity) -> GroupCallState? {
    guard let call = calls[callId], call.visibleIndex(of: who.userId) != nil else { return nil }
    return state(of: call)
  }

  // MARK: - Helpers

  /// Takes a joined device out of the call; the call ends when nobody is left in it.
  private mutating func depart(_ call: inout Call, _ who: Identity, now: Date) -> [CallEffect] {
    guard let i = call.index(of: who.userId) else { return [] }
    call.members[i].state = .left
    call.members[i].leftAt = now
    if let joinedAt = call.members[i].joinedAt { call.members[i].inCall += now.timeIntervalSince(joinedAt) }
    calls[call.id] = call
    var effects: [CallEffect] = [
      .sfu(.leave(callId: call.id, participant: who)),
      .cancel(CallTimer(callId: call.id, kind: .grace(userId: who.userId, deviceId: who.deviceId))),
    ]
    if call.joinedCount == 0 {
      effects += finish(&call, call.phase == .ringing ? .cancelled : .completed, now: now, from: nil)
    } else {
      effects += updates(call)
    }
    return effects
  }

  /// After a member stopped ringing: a call nobody answered ends once nobody is left to ring.
  private mutating func settle(_ call: inout Call, now: Date) -> [CallEffect] {
    let stillRinging = call.members.contains { [.invited, .ringing].contains($0.state) }
    if call.phase == .ringing, !stillRinging {
      return finish(&call, .unanswered, now: now, from: nil)
    }
    return updates(call)
  }

  private mutating func finish(_ call: inout Call, _ reason: GroupEndReason, now: Date, from: Identity?) -> [CallEffect]
  {
    var effects: [CallEffect] = []
    var notified: [Recipient] = []
    for member in call.members {
      switch member.state {
      case .joined:
        if let deviceId = member.deviceId {
          effects.append(
            .cancel(CallTimer(callId: call.id, kind: .grace(userId: member.userId, deviceId: deviceId))))
          if !(from?.userId == member.userId && from?.deviceId == deviceId) {
            notified.append(.device(userId: member.userId, deviceId: deviceId))
          }
        }
      case .invited, .ringing:
        effects += stopRing(call, member.userId)
        if !call.silenced.contains(member.userId) { notified.append(.user(userId: member.userId, exceptDevice: nil)) }
      case .declined, .missed, .left, .removed:
        break
      }
    }
    call.closeMembers(at: now)
    call.phase = .ended
    call.endedAt = now
    call.endReason = reason
    calls[call.id] = call
    if let room = call.room, rooms[room] == call.id { rooms[room] = nil }
    endedOrder.append((call.id, now))
    let ended = ServerMessage.groupEnded(.init(callId: call.id, reason: reason, from: from?.peer))
    effects += notified.map { .send(ended, to: $0) }
    effects.append(.sfu(.close(callId: call.id)))
    effects.append(.external(.groupEnded(record(of: call))))
    return effects
  }

  private func stopRing(_ call: Call, _ userId: String) -> [CallEffect] {
    let timer = CallEffect.cancel(CallTimer(callId: call.id, kind: .memberRing(userId: userId)))
    if call.silenced.contains(userId) { return [timer] }
    return [timer, .external(.groupRingStopped(callId: call.id, memberId: userId))]
  }

  /// The participant list, to every device of every member the call exists for.
  private func updates(_ call: Call) -> [CallEffect] {
    let update = ServerMessage.groupUpdate(.init(callId: call.id, group: state(of: call)))
    return call.members.filter { call.visibleIndex(of: $0.userId) != nil }.map {
      .send(update, to: .user(userId: $0.userId, exceptDevice: nil))
    }
  }

  /// The ring, `from` the device that rang: the creator's, or the inviter's for `group-invite`.
  private func inviteMessage(_ call: Call, from: Peer) -> ServerMessage {
    .groupInvite(
      .init(
        callId: call.id, from: from, video: call.video, title: call.title,
        memberCount: call.memberCount, createdAt: call.createdAt.millisecondsSince1970, group: state(of: call)))
  }

  private func state(of call: Call) -> GroupCallState {
    GroupCallState(
      callId: call.id, creatorId: call.creator.userId, title: call.title, room: call.room, video: call.video,
      state: call.phase, createdAt: call.createdAt.millisecondsSince1970,
      endedAt: call.endedAt?.millisecondsSince1970, endReason: call.endReason,
      members: call.members.map {
        GroupMember(
          userId: $0.userId, state: $0.state, deviceId: $0.deviceId, name: $0.name,
          joinedAt: $0.joinedAt?.millisecondsSince1970, leftAt: $0.leftAt?.millisecondsSince1970)
      })
  }

  private func record(of call: Call) -> GroupCallRecord {
    GroupCallRecord(
      callId: call.id, creatorId: call.creator.userId, title: call.title, room: call.room, video: call.video,
      createdAt: call.createdAt.millisecondsSince1970, endedAt: (call.endedAt ?? call.createdAt).millisecondsSince1970,
      endReason: call.endReason ?? .ended,
      participants: call.members.map {
        GroupParticipantRecord(
          userId: $0.userId, outcome: $0.state, deviceId: $0.deviceId,
          joinedAt: $0.firstJoinedAt?.millisecondsSince1970,
          durationMs: $0.firstJoinedAt == nil ? nil : Int64(($0.inCall * 1000).rounded()))
      })
  }

  private mutating func pruneEnded(now: Date) {
    var drop = 0
    while drop < endedOrder.count, now.timeIntervalSince(endedOrder[drop].1) > settings.endedRetention.seconds {
      calls.removeValue(forKey: endedOrder[drop].0)
      drop += 1
    }
    if drop > 0 { endedOrder.removeFirst(drop) }
  }

  private func ack(_ id: String, _ call: Call) -> ServerMessage {
    .ack(.init(replyTo: id, callId: call.id, group: state(of: call)))
  }
  private func error(_ id: String, _ callId: CallID, _ code: ErrorCode, _ message: String) -> Outcome {
    Outcome(reply: .error(.init(replyTo: id, code: code, message: message, callId: callId)))
  }
  /// Unknown, or not this user's: the same answer either way, so nothing leaks.
  private func notFound(_ id: String, _ callId: CallID) -> Outcome { error(id, callId, .notFound, "no such call") }
  private func invalidState(_ id: String, _ call: Call) -> Outcome {
    error(id, call.id, .invalidState, "not allowed now: the group call is \(call.phase.rawValue)")
  }
}
