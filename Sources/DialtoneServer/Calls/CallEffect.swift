import DialtoneProtocol
import Foundation

/// Who a router message is for: one device's session, or every session of a user.
enum Recipient: Sendable, Hashable {
  case device(userId: String, deviceId: String)
  case user(userId: String, exceptDevice: String?)
}

/// A timer the router asked for; it comes back through `CallRouter.timerFired`.
struct CallTimer: Sendable, Hashable {
  enum Kind: Sendable, Hashable {
    case ring
    /// A participant device's socket dropped; the call ends if it is not back in time.
    case grace(userId: String, deviceId: String)
  }
  let callId: CallID
  let kind: Kind
}

/// What the router wants done; the hub carries it out, so the router stays a pure state machine.
enum CallEffect: Sendable {
  case send(ServerMessage, to: Recipient)
  case schedule(CallTimer, after: Duration)
  case cancel(CallTimer)
  case external(CallEvent)
}

/// Call events other subsystems act on (storage, push).
public enum CallEvent: Sendable {
  /// A call started ringing `calleeId`'s devices.
  case ringing(callId: CallID, caller: Peer, calleeId: String, video: Bool, createdAt: Date)
  /// A call ended; `record` is what the history keeps.
  case ended(CallRecord)

  var userId: String {
    switch self {
    case .ringing(_, _, let calleeId, _, _): return calleeId
    case .ended(let record): return record.calleeId
    }
  }
}

/// Receives `CallEvent`s together with the devices of the event's user that have a live socket.
public protocol CallEffectSink: Sendable {
  func handle(_ event: CallEvent, connectedDevices: Set<String>)
}
