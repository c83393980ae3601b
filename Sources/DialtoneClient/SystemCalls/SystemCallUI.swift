import DialtoneProtocol
import Foundation

/// Why the OS call ended (CallKit `CXCallEndedReason`).
public enum SystemCallEndReason: String, Sendable, Equatable, CaseIterable {
  case failed
  case remoteEnded
  case unanswered
  case answeredElsewhere
  case declinedElsewhere

  /// The OS reason for a `call-ended` received over signaling by the callee side.
  public init(signaled reason: EndReason) {
    switch reason {
    case .answeredElsewhere: self = .answeredElsewhere
    case .declinedElsewhere, .declined, .busy: self = .declinedElsewhere
    case .missed: self = .unanswered
    case .failed, .connectionLost: self = .failed
    case .cancelled, .hangup, .glare: self = .remoteEnded
    }
  }

  /// The OS reason for a group call that ended for this device (`group-ended`, or a `get-group`
  /// answer): joined or declined on another device of this user, the ring missed, the creator
  /// gave up or ended it, the last one left, the owner removed this user, or the media or the
  /// connection failed.
  public init(group reason: GroupEndReason) {
    switch reason {
    case .joinedElsewhere: self = .answeredElsewhere
    case .declinedElsewhere: self = .declinedElsewhere
    case .missed, .unanswered: self = .unanswered
    case .cancelled, .ended, .completed, .removed: self = .remoteEnded
    case .mediaFailed, .connectionLost, .serverRestart: self = .failed
    }
  }

  /// The OS reason for a `call-ended` of an outgoing call.
  public init(signaledToCaller reason: EndReason) {
    switch reason {
    case .missed: self = .unanswered
    case .failed, .connectionLost: self = .failed
    default: self = .remoteEnded
    }
  }
}

/// An incoming call as the OS is told of it (`CXCallUpdate` on iOS).
public struct IncomingCallReport: Sendable, Equatable {
  public enum Origin: Sendable, Equatable {
    /// A VoIP push: reported synchronously inside PushKit's delegate method.
    case push
    /// An `invite` over signaling.
    case invite
  }

  public var uuid: UUID
  /// nil for a malformed push.
  public var callId: CallID?
  public var handle: String
  public var displayName: String?
  public var hasVideo: Bool
  public var origin: Origin
  /// Report, then end at once with this reason (a malformed push, a push for a call that is
  /// already over on this device).
  public var endAtOnce: SystemCallEndReason?
  /// A group call's ring (a group push or a `group-invite`): `handle` is its creator and
  /// `displayName` its title, or the creator's name. It cannot be held.
  public var isGroup: Bool

  public init(
    uuid: UUID, callId: CallID?, handle: String, displayName: String?, hasVideo: Bool, origin: Origin,
    endAtOnce: SystemCallEndReason? = nil, isGroup: Bool = false
  ) {
    self.uuid = uuid
    self.callId = callId
    self.handle = handle
    self.displayName = displayName
    self.hasVideo = hasVideo
    self.origin = origin
    self.endAtOnce = endAtOnce
    self.isGroup = isGroup
  }
}

/// A transaction the app asks the OS for (`CXTransaction` on iOS); the OS answers by sending
/// the matching action to the provider delegate.
public enum SystemCallTransaction: Sendable, Equatable {
  case startCall(uuid: UUID, handle: String, displayName: String?, video: Bool)
  case answer(uuid: UUID)
  case end(uuid: UUID)
  case setMuted(uuid: UUID, muted: Bool)
  case setHeld(uuid: UUID, held: Bool)

  public var uuid: UUID {
    switch self {
    case .startCall(let uuid, _, _, _), .answer(let uuid), .end(let uuid), .setMuted(let uuid, _),
      .setHeld(let uuid, _):
      return uuid
    }
  }
}

/// The OS call UI (CallKit's `CXProvider` and `CXCallController` on iOS). Every method maps
/// one to one onto the platform call and returns at once, like CallKit's own methods: the
/// rules (when to report, with which reason) are `SystemCallCoordinator`'s.
public protocol SystemCallUI: Sendable {
  /// `reportNewIncomingCall(with:update:completion:)`. It must be *invoked* synchronously:
  /// iOS checks that a VoIP push was reported when PushKit's delegate method returns.
  /// The completion's error is non-nil when the OS refused the call (Do Not Disturb, blocked
  /// handle, duplicate UUID, …).
  func reportNewIncomingCall(_ call: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void)
  func reportOutgoingCallStartedConnecting(uuid: UUID)
  func reportOutgoingCallConnected(uuid: UUID)
  func reportCallEnded(uuid: UUID, reason: SystemCallEndReason)
  func reportCallUpdated(uuid: UUID, hasVideo: Bool)
  func request(_ transaction: SystemCallTransaction, completion: @escaping @Sendable ((any Error)?) -> Void)
}

/// An action the OS asks the app to perform (`CXAction` on iOS), as a plain value.
public struct SystemCallAction: Sendable, Equatable {
  public enum Kind: Sendable, Equatable {
    case startCall
    case answer
    case end
    case setMuted(Bool)
    case setHeld(Bool)
    case playDTMF(String)
  }

  /// The action's own id (`CXAction.uuid`): `timedOutPerforming` names the action by it.
  public var id: UUID
  /// The call it is for (`CXCallAction.callUUID`).
  public var callUUID: UUID
  public var kind: Kind
  /// When the OS gives up on the action (`CXAction.timeoutDate`).
  public var timeoutDate: Date

  public init(id: UUID, callUUID: UUID, kind: Kind, timeoutDate: Date) {
    self.id = id
    self.callUUID = callUUID
    self.kind = kind
    self.timeoutDate = timeoutDate
  }
}

/// Settles one OS action (`CXAction.fulfill()` / `fail()`). The session calls at most one of
/// them, once, and never after the OS reported that the action timed out.
public protocol SystemCallActionHandle: Sendable {
  func fulfill()
  func fail()
}

/// Why the coordinator asks for a call to end over signaling.
public enum LocalEndCause: String, Sendable, Equatable {
  /// The user ended (or declined) the call in the OS UI.
  case user
  /// The answer did not lead to a connected call before the OS's deadline.
  case answerTimedOut
  /// The OS reset its provider: every call ends.
  case providerReset
  /// The OS refused to show the call.
  case systemRejected
}

/// The device's audio session and camera, as the call rules drive them. On iOS this is
/// WebRTC's `RTCAudioSession` in manual-audio mode and the camera capturer.
public protocol CallMediaControl: Sendable {
  /// Before the OS activates audio for a call: the audio mode for it (`.videoChat` for video,
  /// which also routes to the speaker, `.voiceChat` otherwise).
  func prepareAudio(video: Bool)
  /// The OS activated the audio session: audio I/O may start (rule 5).
  func audioSessionActivated()
  /// The OS deactivated the audio session, or reset its provider: audio I/O stops.
  func audioSessionDeactivated()
  /// The user answered or placed a video call.
  func startCamera()
  func stopCamera()
}

/// The media of group calls whose SFU the app connects to itself: with LiveKit the server hands
/// over `{url, token}` (`GroupCall.Event.liveKit`). On iOS this is LiveKit's Swift SDK
/// (`LiveKitGroupMedia` in `Apple/`). Janus group calls need none: their media are the SDK's own
/// `PeerConnection`s, whose audio follows `CallMediaControl`.
///
/// The session calls it in the order its coordinator decides. The implementation reports its
/// connection back with `SystemCallSession.groupMediaStateChanged(_:_:)`: `.connected` fulfills
/// the answer action, `.failed` ends the call.
public protocol GroupMediaControl: Sendable {
  /// Joins the call's media room, audio off until `audioSessionActivated()`; `muted` says
  /// whether the microphone may be published.
  func connect(callId: CallID, url: String, token: String, video: Bool, muted: Bool)
  func setMuted(callId: CallID, muted: Bool)
  /// Leaves the call's media room (the call was left, or ended).
  func disconnect(callId: CallID)
  /// The OS activated the audio session: audio I/O may start (rule 5).
  func audioSessionActivated()
  /// The OS deactivated the audio session, or reset its provider: audio I/O stops.
  func audioSessionDeactivated()
}
