import DialtoneProtocol
import Foundation

/// A 1:1 call that has not ended, as the journal keeps it: enough for a restarted server to
/// carry on with it (who is in it, its phase, the deadlines of its timers, and what late or
/// reconnecting devices are sent).
struct LiveCallSnapshot: Sendable, Equatable {
  enum Phase: String, Sendable {
    case ringing
    case accepted
  }

  var callId: CallID
  var caller: Identity
  var calleeId: String
  var video: Bool
  var createdAt: Int64
  var phase: Phase
  var answeredBy: String?
  var answeredAt: Int64?
  var ringDeadline: Int64
  /// Deadlines of the reconnect grace of the caller's device and of the answering device, when
  /// their sockets were down.
  var callerGraceDeadline: Int64?
  var answererGraceDeadline: Int64?
  /// The invite as relayed (with its offer).
  var invite: ServerMessage
  /// The accept as relayed (with its answer), sent again to a new session of the caller's device.
  var accept: ServerMessage?
  /// The callee blocks the caller (`CallRouter.Call.blocked`).
  var blocked = false
}

/// A live call with the caller signaling held for late callee devices, as the journal reloads it.
struct StoredLiveCall: Sendable, Equatable {
  var snapshot: LiveCallSnapshot
  var callerSignals: [ServerMessage]
}

/// One change the router makes to what must survive a restart. The journal writes each batch in
/// one transaction, before the hub lets anyone see the change.
enum LiveCallChange: Sendable, Equatable {
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
struct RecentlyEndedCall: Sendable, Equatable {
  var record: CallRecord
  var callerDevice: String
  var blocked = false
}

extension CallRouter.Call {
  var snapshot: LiveCallSnapshot {
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

  init?(restoring ended: RecentlyEndedCall) {
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

  init(restoring stored: StoredLiveCall) {
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
