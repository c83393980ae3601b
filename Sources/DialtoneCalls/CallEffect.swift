import DialtoneProtocol
import Foundation

/// Who a router message is for: one device's session, or every session of a user.
package enum Recipient: Sendable, Hashable {
  case device(userId: String, deviceId: String)
  case user(userId: String, exceptDevice: String?)
}

/// A timer the router asked for; it comes back through `CallRouter.timerFired`.
package struct CallTimer: Sendable, Hashable {
  package enum Kind: Sendable, Hashable {
    case ring
    /// A participant device's socket dropped; the call ends if it is not back in time.
    case grace(userId: String, deviceId: String)
    /// One member of a group call is being rung; the ring ends as missed when it fires.
    case memberRing(userId: String)
  }
  package let callId: CallID
  package let kind: Kind
}

/// What the router wants done; the hub carries it out, so the router stays a pure state machine.
///
/// The effects a relayed message makes (a `send`) are most of them: the rarer, larger payloads
/// are kept out of line (`indirect`), so that an effect is the size of a `send` (a live call's
/// change inline made every effect 442 bytes, each copied whole as the effects move).
package enum CallEffect: Sendable, Equatable {
  case send(ServerMessage, to: Recipient)
  case schedule(CallTimer, after: Duration)
  case cancel(CallTimer)
  indirect case external(CallEvent)
  /// Work for the group call's media server (`SFUBackend`).
  indirect case sfu(SFUCommand)
  /// A change that must be in the journal before the outcome it belongs to is seen by anyone.
  indirect case persist(LiveCallChange)
}

/// What the group router asks of the media server. Results come back as `SFUEvent`s.
package enum SFUCommand: Sendable, Equatable {
  /// A group call started: make its room.
  case open(callId: CallID, video: Bool)
  /// A device joined the call: give it a way into the room. `multistream`: it asked to receive
  /// everyone on one subscriber connection (protocol.md 20.9).
  case join(callId: CallID, participant: Identity, multistream: Bool = false)
  /// A device already in the call joins the room made again on this node (a cluster node took
  /// the call over): it is told to publish afresh (`group-media` with `restart`), and is
  /// offered the others again. `open` came first.
  case rejoin(callId: CallID, participant: Identity, multistream: Bool)
  /// A device left the call (or its grace ran out): take it out of the room.
  case leave(callId: CallID, participant: Identity)
  /// The call ended: close the room.
  case close(callId: CallID)
  /// A negotiation message from a joined device (group-offer / -answer / -candidate / -end-of-candidates).
  case signal(callId: CallID, participant: Identity, message: ClientMessage)

  package var callId: CallID {
    switch self {
    case .open(let id, _), .join(let id, _, _), .rejoin(let id, _, _), .leave(let id, _), .close(let id),
      .signal(let id, _, _):
      return id
    }
  }
}

/// Call events other subsystems act on (storage, push).
public enum CallEvent: Sendable, Equatable {
  /// A call started ringing `calleeId`'s devices.
  case ringing(callId: CallID, caller: Peer, calleeId: String, video: Bool, createdAt: Date)
  /// A call ended; `record` is what the history keeps.
  case ended(CallRecord)
  /// A group call started ringing `memberId`'s devices.
  case groupRinging(GroupRing)
  /// `memberId`'s ring stopped (joined, declined, missed, or the call ended).
  case groupRingStopped(callId: CallID, memberId: String)
  /// A group call ended.
  case groupEnded(GroupCallRecord)

  package var userId: String {
    switch self {
    case .ringing(_, _, let calleeId, _, _): return calleeId
    case .ended(let record): return record.calleeId
    case .groupRinging(let ring): return ring.memberId
    case .groupRingStopped(_, let memberId): return memberId
    case .groupEnded(let record): return record.creatorId
    }
  }
}

/// A group call ringing one member (what a push for it says).
public struct GroupRing: Sendable, Equatable {
  public let callId: CallID
  public let creator: Peer
  public let memberId: String
  public let title: String?
  public let memberCount: Int
  public let video: Bool
  public let createdAt: Date
}

/// Receives `CallEvent`s together with the devices of the event's user that have a live socket.
public protocol CallEffectSink: Sendable {
  func handle(_ event: CallEvent, connectedDevices: Set<String>)
}
