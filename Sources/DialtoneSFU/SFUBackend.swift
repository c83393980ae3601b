import DialtoneCalls
import DialtoneProtocol

/// The media server of group calls, seen from the hub. Commands are fire-and-forget (the hub
/// never waits on the SFU); what they lead to comes back as `SFUEvent`s, from any thread.
///
/// Two backends: `JanusSFU` (the server proxies every negotiation; Janus is never seen by
/// clients) and `LiveKitSFU` (clients connect to LiveKit with a token the server mints).
package protocol SFUBackend: Sendable {
  var kind: SFUKind { get }
  /// Connects to the media server. `events` receives every result, from any thread.
  func start(events: @escaping @Sendable (SFUEvent) -> Void) async throws
  func perform(_ command: SFUCommand)
  /// Closes every room this backend opened and disconnects.
  func shutdown() async
}

/// What the SFU tells the hub.
package enum SFUEvent: Sendable, Equatable {
  /// A message for one joined device of a call (group-media / -offer / -answer / -candidate / -stream-ended).
  case send(ServerMessage, callId: CallID, to: Identity)
  /// The call's media is gone (the SFU died, restarted, or refused the room).
  case callFailed(callId: CallID, reason: String)
  /// The SFU saw a device leave the room by itself (LiveKit's `participant_left`).
  case participantLeft(callId: CallID, participant: Identity)
  /// The SFU saw a device enter the room (LiveKit's `participant_joined`): one the call does not
  /// have joined (it left, was dropped, or was never in) is removed again, since a LiveKit token
  /// stays valid after RemoveParticipant.
  case participantJoined(callId: CallID, participant: Identity)
  /// The SFU closed the room (LiveKit's `room_finished`).
  case roomFinished(callId: CallID)
}
