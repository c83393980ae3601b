import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A 1:1 call that has not ended, as the journal keeps it: enough for a restarted server to
/// carry on with it (who is in it, its phase, the deadlines of its timers, and what late or
/// reconnecting devices are sent).
package struct LiveCallSnapshot: Sendable, Equatable {
  package enum Phase: String, Sendable {
    case ringing
    case accepted
  }

  package var callId: CallID
  package var caller: Identity
  package var calleeId: String
  package var video: Bool
  package var createdAt: Int64
  package var phase: Phase
  package var answeredBy: String?
  package var answeredAt: Int64?
  package var ringDeadline: Int64
  /// Deadlines of the reconnect grace of the caller's device and of the answering device, when
  /// their sockets were down.
  package var callerGraceDeadline: Int64?
  package var answererGraceDeadline: Int64?
  /// The invite as relayed (with its offer).
  package var invite: ServerMessage
  /// The accept as relayed (with its answer), sent again to a new session of the caller's device.
  package var accept: ServerMessage?
  /// The callee blocks the caller (`CallRouter.Call.blocked`).
  package var blocked = false

  package init(
    callId: CallID, caller: Identity, calleeId: String, video: Bool, createdAt: Int64, phase: Phase,
    answeredBy: String?, answeredAt: Int64?, ringDeadline: Int64, callerGraceDeadline: Int64?,
    answererGraceDeadline: Int64?, invite: ServerMessage, accept: ServerMessage?, blocked: Bool = false
  ) {
    self.callId = callId
    self.caller = caller
    self.calleeId = calleeId
    self.video = video
    self.createdAt = createdAt
    self.phase = phase
    self.answeredBy = answeredBy
    self.answeredAt = answeredAt
    self.ringDeadline = ringDeadline
    self.callerGraceDeadline = callerGraceDeadline
    self.answererGraceDeadline = answererGraceDeadline
    self.invite = invite
    self.accept = accept
    self.blocked = blocked
  }
}

/// A live call with the caller signaling held for late callee devices, as the journal reloads it.
package struct StoredLiveCall: Sendable, Equatable {
  package var snapshot: LiveCallSnapshot
  package var callerSignals: [ServerMessage]
  /// How many times a cluster node took the call over, plus one: the owner's fencing token
  /// (`LiveCallStore.takeOver`). Always 1 on one server.
  package var epoch: Int64

  package init(snapshot: LiveCallSnapshot, callerSignals: [ServerMessage], epoch: Int64 = 1) {
    self.snapshot = snapshot
    self.callerSignals = callerSignals
    self.epoch = epoch
  }
}

/// One change the router makes to what must survive a restart. The journal writes each batch in
/// one transaction, before the hub lets anyone see the change.
package enum LiveCallChange: Sendable, Equatable {
  /// The call's state, replacing what was stored. An accepted call holds no caller signals.
  case put(LiveCallSnapshot)
  /// Caller signaling while it rings, appended in order.
  case signal(CallID, ServerMessage)
  /// The call ended: its live state goes, its record is added to the history (never replacing
  /// another record), with the caller's device so that a restarted server knows whose it was.
  /// A blocked call's record is kept from the callee's history.
  case ended(CallRecord, callerDevice: String, blocked: Bool = false)
  /// A group call is live; this is the record it would leave if the server stopped now.
  /// `silenced`: the members who block its creator, whose history does not show it. `state`:
  /// the call as a cluster node that takes it over carries on with it.
  case groupLive(GroupCallRecord, silenced: Set<String> = [], state: GroupCallSnapshot? = nil)
  /// A group call ended: its record replaces the live one.
  case groupEnded(GroupCallRecord, silenced: Set<String> = [])

  /// The call the change writes, whose owner's epoch fences it (cluster mode).
  package var fencedCallId: CallID? {
    switch self {
    case .put(let call): call.callId
    case .signal(let callId, _): callId
    case .ended(let record, _, _): record.callId
    case .groupLive(let record, _, _), .groupEnded(let record, _): record.callId
    }
  }

  /// Whether the change writes a group call (fenced against `live_group_calls`).
  package var isGroupCall: Bool {
    switch self {
    case .groupLive, .groupEnded: true
    case .put, .signal, .ended: false
    }
  }
}

/// A call that ended shortly before a restart, reloaded so that `get-call` and retried requests
/// get the answers they would have got before it.
package struct RecentlyEndedCall: Sendable, Equatable {
  package var record: CallRecord
  package var callerDevice: String
  package var blocked = false

  package init(record: CallRecord, callerDevice: String, blocked: Bool = false) {
    self.record = record
    self.callerDevice = callerDevice
    self.blocked = blocked
  }
}

extension CallRouter.Call {
  package var snapshot: LiveCallSnapshot {
    LiveCallSnapshot(
      callId: id, caller: caller, calleeId: calleeId, video: video, createdAt: createdAt.millisecondsSince1970,
      phase: answeringDevice == nil ? .ringing : .accepted, answeredBy: answeredBy,
      answeredAt: answeredAt?.millisecondsSince1970, ringDeadline: ringDeadline.millisecondsSince1970,
      callerGraceDeadline: callerGraceDeadline?.millisecondsSince1970,
      answererGraceDeadline: answererGraceDeadline?.millisecondsSince1970, invite: inviteMessage,
      accept: acceptMessage, blocked: blocked)
  }

  package init?(restoring ended: RecentlyEndedCall) {
    let r = ended.record
    guard let reason = r.endReason, let endedAt = r.endedAt else { return nil }
    let createdAt = Date(milliseconds: r.createdAt)
    let caller = Identity(userId: r.callerId, deviceId: ended.callerDevice, name: nil)
    self.init(
      id: r.callId, caller: caller, calleeId: r.calleeId, video: r.video, createdAt: createdAt, ringDeadline: createdAt,
      invitation: CallRouter.Invitation(offer: nil, preconnect: false))
    var accepted: CallRouter.Acceptance?
    if let device = r.answeredBy, let at = r.answeredAt {
      accepted = CallRouter.Acceptance(
        device: Peer(userId: r.calleeId, deviceId: device), at: Date(milliseconds: at), answer: nil, onLeg: false)
    }
    phase = .ended(reason, at: Date(milliseconds: endedAt), accepted: accepted)
    blocked = ended.blocked
  }

  package init(restoring stored: StoredLiveCall) {
    let s = stored.snapshot
    var invitation = CallRouter.Invitation(offer: nil, preconnect: false)
    if case .invite(let invite) = s.invite {
      invitation = CallRouter.Invitation(offer: invite.offer, preconnect: invite.preconnect)
    }
    self.init(
      id: s.callId, caller: s.caller, calleeId: s.calleeId, video: s.video, createdAt: Date(milliseconds: s.createdAt),
      ringDeadline: Date(milliseconds: s.ringDeadline), invitation: invitation)
    switch s.phase {
    case .ringing:
      phase = .ringing(
        legs: [:], signals: stored.callerSignals,
        signalBytes: stored.callerSignals.reduce(0) { $0 + CallRouter.bufferedSize($1) })
    case .accepted:
      var answer: SessionDescription?
      var onLeg = false
      var device = Peer(userId: s.calleeId, deviceId: s.answeredBy ?? "")
      if case .accept(let accept)? = s.accept {
        (answer, onLeg, device) = (accept.answer, accept.preconnected, accept.from)
      }
      phase = .accepted(
        CallRouter.Acceptance(
          device: device, at: Date(milliseconds: s.answeredAt ?? s.createdAt), answer: answer, onLeg: onLeg))
    }
    callerGraceDeadline = s.callerGraceDeadline.map { Date(milliseconds: $0) }
    answererGraceDeadline = s.answererGraceDeadline.map { Date(milliseconds: $0) }
    blocked = s.blocked
  }
}
