#if os(iOS)
  import CallKit
  import DialtoneClient
  import Foundation

  /// `SystemCallUI` over CallKit: reports go to `CXProvider`, transactions to
  /// `CXCallController`. Every method maps one to one onto the CallKit call and returns at once,
  /// like CallKit's own methods; when to call which, and with which reason, is
  /// `SystemCallCoordinator`'s (run by `SystemCallSession`).
  ///
  /// The incoming report is *invoked* synchronously, so `SystemCallSession.receiveVoIPPush` can
  /// report a push before PushKit's delegate method returns.
  public final class CallKitSystemCallUI: SystemCallUI, @unchecked Sendable {
    // @unchecked: CXProvider and CXCallController are not Sendable-annotated; both references are
    // immutable here and CallKit accepts reports and transaction requests from any thread.
    public let provider: CXProvider
    public let callController: CXCallController

    /// - Parameters:
    ///   - iconTemplateImageData: PNG of a monochrome 40×40 pt icon shown in the call UI.
    ///   - ringtoneSound: a sound file name in the main bundle, or nil for the system ringtone.
    public init(iconTemplateImageData: Data? = nil, ringtoneSound: String? = nil) {
      provider = CXProvider(configuration: Self.configuration(icon: iconTemplateImageData, ringtone: ringtoneSound))
      callController = CXCallController()
    }

    /// One call at a time (no grouping), video-capable, `.generic` handles (user ids), listed in
    /// Recents (redial arrives as an `INStartCallIntent`, see docs/ios.md).
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

    /// Installs the delegate (`CallKitProviderDelegate`). Call at launch, before PushKit's
    /// registry exists. `queue` nil means the main queue; CallKit calls the delegate on it in
    /// order, and the delegate forwards each callback synchronously.
    public func setDelegate(_ delegate: any CXProviderDelegate, queue: DispatchQueue? = nil) {
      provider.setDelegate(delegate, queue: queue)
    }

    // MARK: Reports (app → CallKit)

    public func reportNewIncomingCall(
      _ call: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void
    ) {
      // A group call goes on for the others: it cannot be held (the core fails a hold action).
      provider.reportNewIncomingCall(
        with: call.uuid,
        update: Self.update(
          handle: call.handle, displayName: call.displayName, hasVideo: call.hasVideo, supportsHolding: !call.isGroup),
        completion: completion)
    }

    public func reportOutgoingCallStartedConnecting(uuid: UUID) {
      provider.reportOutgoingCall(with: uuid, startedConnectingAt: nil)
    }

    public func reportOutgoingCallConnected(uuid: UUID) {
      provider.reportOutgoingCall(with: uuid, connectedAt: nil)
    }

    public func reportCallEnded(uuid: UUID, reason: SystemCallEndReason) {
      provider.reportCall(with: uuid, endedAt: nil, reason: CXCallEndedReason(reason))
    }

    public func reportCallUpdated(uuid: UUID, hasVideo: Bool) {
      // A CXCallUpdate changes only the properties that were set on it.
      let update = CXCallUpdate()
      update.hasVideo = hasVideo
      provider.reportCall(with: uuid, updated: update)
    }

    // MARK: Transactions (app → CallKit → CXProviderDelegate)

    /// The OS answers an accepted transaction by sending the matching action to the provider
    /// delegate; `completion` gets CallKit's error when it refused the transaction.
    public func request(_ transaction: SystemCallTransaction, completion: @escaping @Sendable ((any Error)?) -> Void) {
      let action: CXCallAction
      switch transaction {
      case .startCall(let uuid, let handle, _, let video):
        let start = CXStartCallAction(call: uuid, handle: CXHandle(type: .generic, value: handle))
        start.isVideo = video
        action = start
      case .answer(let uuid):
        action = CXAnswerCallAction(call: uuid)
      case .end(let uuid):
        action = CXEndCallAction(call: uuid)
      case .setMuted(let uuid, let muted):
        action = CXSetMutedCallAction(call: uuid, muted: muted)
      case .setHeld(let uuid, let held):
        action = CXSetHeldCallAction(call: uuid, onHold: held)
      }
      callController.request(CXTransaction(action: action)) { [self] error in
        if error == nil, case .startCall(let uuid, let handle, let displayName, let video) = transaction {
          // CXStartCallAction carries no caller name or capabilities: give CallKit (and Recents)
          // the name, and the same capabilities as an incoming call (no DTMF, no grouping).
          provider.reportCall(
            with: uuid, updated: Self.update(handle: handle, displayName: displayName, hasVideo: video))
        }
        completion(error)
      }
    }

    /// A call's handle, name and capabilities. DTMF is off: Dialtone calls are app to app and
    /// the core fails every DTMF action. Grouping is off: one call per group. Holding is off for
    /// a group call's ring.
    static func update(handle: String, displayName: String?, hasVideo: Bool, supportsHolding: Bool = true)
      -> CXCallUpdate
    {
      let update = CXCallUpdate()
      update.remoteHandle = CXHandle(type: .generic, value: handle)
      update.localizedCallerName = displayName
      update.hasVideo = hasVideo
      update.supportsHolding = supportsHolding
      update.supportsDTMF = false
      update.supportsGrouping = false
      update.supportsUngrouping = false
      return update
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
