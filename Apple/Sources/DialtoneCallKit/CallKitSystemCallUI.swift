#if os(iOS)
import CallKit
import DialtoneClient
import DialtoneProtocol
import Foundation

/// `SystemCallUI` over CallKit: what the app reports to the system (`CXProvider`) and the
/// transactions it requests (`CXCallController`). Every mapping is one to one; the rules
/// (when to report, with which reason) are `IncomingCallCoordinator`'s.
public final class CallKitSystemCallUI: SystemCallUI, @unchecked Sendable {
  public let provider: CXProvider
  public let callController = CXCallController()

  /// - Parameters:
  ///   - iconTemplateImageData: PNG of a monochrome 40×40 pt icon shown in the call UI.
  ///   - ringtoneSound: a sound file name in the main bundle, or nil for the system ringtone.
  public init(iconTemplateImageData: Data? = nil, ringtoneSound: String? = nil) {
    provider = CXProvider(configuration: Self.configuration(icon: iconTemplateImageData, ringtone: ringtoneSound))
  }

  /// One call at a time, video-capable, `.generic` handles (user ids), listed in Recents.
  public static func configuration(icon: Data? = nil, ringtone: String? = nil) -> CXProviderConfiguration {
    let config = CXProviderConfiguration()
    config.supportsVideo = true
    config.maximumCallGroups = 1
    config.maximumCallsPerCallGroup = 1
    config.supportedHandleTypes = [.generic]
    config.includesCallsInRecents = true
    config.iconTemplateImageData = icon
    config.ringtoneSound = ringtone
    return config
  }

  /// Installs the delegate. Call before the first report (i.e. at launch, before PushKit can
  /// deliver a push). `queue` nil means the main queue.
  public func setDelegate(_ delegate: CXProviderDelegate, queue: DispatchQueue? = nil) {
    provider.setDelegate(delegate, queue: queue)
  }

  // MARK: SystemCallUI (app → system)

  public func reportIncomingCall(uuid: UUID, handle: String, displayName: String?, hasVideo: Bool) async throws {
    let update = CXCallUpdate()
    update.remoteHandle = CXHandle(type: .generic, value: handle)
    update.localizedCallerName = displayName
    update.hasVideo = hasVideo
    update.supportsHolding = true
    update.supportsGrouping = false
    update.supportsUngrouping = false
    update.supportsDTMF = true
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
      provider.reportNewIncomingCall(with: uuid, update: update) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }

  public func reportOutgoingCallStartedConnecting(uuid: UUID) async {
    provider.reportOutgoingCall(with: uuid, startedConnectingAt: nil)
  }

  public func reportOutgoingCallConnected(uuid: UUID) async {
    provider.reportOutgoingCall(with: uuid, connectedAt: nil)
  }

  public func reportCallEnded(uuid: UUID, reason: SystemCallEndReason) async {
    provider.reportCall(with: uuid, endedAt: nil, reason: CXCallEndedReason(reason))
  }

  // MARK: Transactions (app → system → CXProviderDelegate)

  /// Asks the system to start an outgoing call whose UUID came from
  /// `IncomingCallCoordinator.startOutgoingCall(callId:)`. The delegate then receives a
  /// `CXStartCallAction`.
  public func requestStartCall(uuid: UUID, handle: String, displayName: String?, video: Bool) async throws {
    let action = CXStartCallAction(call: uuid, handle: CXHandle(type: .generic, value: handle))
    action.isVideo = video
    action.contactIdentifier = displayName
    try await request(action)
  }

  /// Answers a ringing call from the app (e.g. the glare survivor, which the app accepts in
  /// place of its own outgoing call): the delegate then receives a `CXAnswerCallAction`.
  public func requestAnswer(uuid: UUID) async throws {
    try await request(CXAnswerCallAction(call: uuid))
  }

  /// The in-app hang-up button: the delegate then receives a `CXEndCallAction`.
  public func requestEndCall(uuid: UUID) async throws {
    try await request(CXEndCallAction(call: uuid))
  }

  /// The in-app mute button: the delegate then receives a `CXSetMutedCallAction`.
  public func requestSetMuted(uuid: UUID, muted: Bool) async throws {
    try await request(CXSetMutedCallAction(call: uuid, muted: muted))
  }

  public func requestSetHeld(uuid: UUID, held: Bool) async throws {
    try await request(CXSetHeldCallAction(call: uuid, onHold: held))
  }

  /// Tells the system the call's video state changed (e.g. the user turned the camera on).
  public func reportVideo(uuid: UUID, hasVideo: Bool) {
    let update = CXCallUpdate()
    update.hasVideo = hasVideo
    provider.reportCall(with: uuid, updated: update)
  }

  private func request(_ action: CXCallAction) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
      callController.request(CXTransaction(action: action)) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }
}

extension CXCallEndedReason {
  init(_ reason: SystemCallEndReason) {
    switch reason {
    case .failed: self = .failed
    case .remoteEnded: self = .remoteEnded
    case .unanswered: self = .unanswered
    case .answeredElsewhere: self = .answeredElsewhere
    case .declinedElsewhere: self = .declinedElsewhere
    }
  }
}
#endif
