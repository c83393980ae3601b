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

  package init(snapshot: LiveCallSnapshot, callerSignals: [ServerMessage]) {
    self.snapshot = snapshot
    self.callerSignals = callerSignals
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
  /// `silenced`: the members who block its creator, whose history does not show it.
  case groupLive(GroupCallRecord, silenced: Set<String> = [])
  /// A group call ended: its record replaces the live one.
  case groupEnded(GroupCallRecord, silenced: Set<String> = [])
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
    var phase = LiveCallSnapshot.Phase.ringing
    var invite = self.invite
    if case .accepted = self.phase {
      phase = .accepted
      // Only a ringing call's invite is sent again (with its offer): an accepted call's row
      // need not carry the offer's SDP, and every later write of it is the cheaper.
      if case .invite(var relayed) = invite {
        relayed.offer = nil
        invite = .invite(relayed)
      }
    }
    return LiveCallSnapshot(
      callId: id, caller: caller, calleeId: calleeId, video: video, createdAt: createdAt.millisecondsSince1970,
      phase: phase, answeredBy: answeredBy, answeredAt: answeredAt?.millisecondsSince1970,
      ringDeadline: ringDeadline.millisecondsSince1970,
      callerGraceDeadline: callerGraceDeadline?.millisecondsSince1970,
      answererGraceDeadline: answererGraceDeadline?.millisecondsSince1970, invite: invite, accept: acceptRelay,
      blocked: blocked)
  }

  package init?(restoring ended: RecentlyEndedCall) {
    let r = ended.record
    guard let reason = r.endReason, let endedAt = r.endedAt else { return nil }
    let createdAt = Date(milliseconds: r.createdAt)
    let caller = Identity(userId: r.callerId, deviceId: ended.callerDevice, name: nil)
    self.init(
      id: r.callId, caller: caller, calleeId: r.calleeId, video: r.video, createdAt: createdAt,
      ringDeadline: createdAt,
      invite: .invite(.init(callId: r.callId, from: caller.peer, video: r.video, createdAt: r.createdAt)))
    phase = .ended(reason)
    answeredBy = r.answeredBy
    answeredAt = r.answeredAt.map { Date(milliseconds: $0) }
    self.endedAt = Date(milliseconds: endedAt)
    blocked = ended.blocked
  }

  package init(restoring stored: StoredLiveCall) {
    let s = stored.snapshot
    self.init(
      id: s.callId, caller: s.caller, calleeId: s.calleeId, video: s.video, createdAt: Date(milliseconds: s.createdAt),
      ringDeadline: Date(milliseconds: s.ringDeadline), invite: s.invite)
    switch s.phase {
    case .ringing:
      callerSignals = stored.callerSignals
      callerSignalBytes = stored.callerSignals.reduce(0) { $0 + CallRouter.bufferedSize($1) }
    case .accepted:
      phase = .accepted(deviceId: s.answeredBy ?? "")
    }
    answeredBy = s.answeredBy
    answeredAt = s.answeredAt.map { Date(milliseconds: $0) }
    callerGraceDeadline = s.callerGraceDeadline.map { Date(milliseconds: $0) }
    answererGraceDeadline = s.answererGraceDeadline.map { Date(milliseconds: $0) }
    acceptRelay = s.accept
    blocked = s.blocked
  }
}
