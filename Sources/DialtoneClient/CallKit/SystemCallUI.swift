import DialtoneProtocol
import Foundation

/// Why the OS call ended (CallKit `CXCallEndedReason`).
public enum SystemCallEndReason: String, Sendable, Equatable, CaseIterable {
  case failed
  case remoteEnded
  case unanswered
  case answeredElsewhere
  case declinedElsewhere

  /// The OS reason for a `call-ended` received over signaling.
  public init(signaled reason: EndReason) {
    switch reason {
    case .answeredElsewhere: self = .answeredElsewhere
    case .declinedElsewhere, .declined, .busy: self = .declinedElsewhere
    case .missed: self = .unanswered
    case .failed, .connectionLost: self = .failed
    case .cancelled, .hangup, .glare: self = .remoteEnded
    }
  }
}

/// The OS call UI (CallKit's `CXProvider` on iOS): what the app reports to it.
///
/// An iOS adapter maps these one to one: `reportNewIncomingCall(with:update:)` (handle type
/// `.generic`, `localizedCallerName`, `hasVideo`), `reportOutgoingCall(with:startedConnectingAt:)`,
/// `reportOutgoingCall(with:connectedAt:)`, `reportCall(with:endedAt:reason:)`.
/// The actions the OS sends back (answer, end, mute, hold, DTMF, audio session, reset) go to
/// `IncomingCallCoordinator`'s `perform…`/`didActivate…` methods.
public protocol SystemCallUI: Sendable {
  /// Throws when the OS refuses the call (Do Not Disturb, block list, duplicate UUID…).
  func reportIncomingCall(uuid: UUID, handle: String, displayName: String?, hasVideo: Bool) async throws
  func reportOutgoingCallStartedConnecting(uuid: UUID) async
  func reportOutgoingCallConnected(uuid: UUID) async
  func reportCallEnded(uuid: UUID, reason: SystemCallEndReason) async
}

/// Why the coordinator asks the app to end a call over signaling.
public enum LocalEndCause: String, Sendable, Equatable {
  /// The user ended (or declined) the call in the OS UI.
  case user
  /// The answer did not lead to a connected call in time.
  case answerTimedOut
  /// The OS reset its provider: every call ends.
  case providerReset
  /// The OS refused to show the call.
  case systemRejected
}

/// What the coordinator asks of the app's signaling / media layer. Implementations should
/// return promptly (start the work, do not wait for the network); results come back through
/// the coordinator's `resolvePushedCall`, `incomingInvite`, `callConnected` and `remoteEnded`.
public protocol CallSignalingActions: Sendable {
  /// A VoIP push announced `callId`: connect signaling if needed and, after `welcome`,
  /// send `get-call` for it (its answer goes to `resolvePushedCall`).
  func connectForPushedCall(_ callId: CallID) async
  /// The user answered: send `accept` (once the invite is there) and negotiate media.
  /// Do not start audio: that waits for `audioSessionActivated()`.
  func answer(_ callId: CallID) async
  /// End the call over signaling: `decline` while it rings, `hangup` once accepted,
  /// `cancel` for an outgoing call not yet accepted.
  func end(_ callId: CallID, cause: LocalEndCause) async
  func setMuted(_ callId: CallID, muted: Bool) async
  func setHeld(_ callId: CallID, held: Bool) async
  func playDTMF(_ callId: CallID, digits: String) async
  /// The OS activated the audio session: start audio I/O now (manual audio mode).
  func audioSessionActivated() async
  /// The OS deactivated the audio session: stop audio I/O.
  func audioSessionDeactivated() async
}
