#if os(iOS)
  import AVFoundation
  import CallKit
  import DialtoneClient
  import Foundation

  /// The `CXProviderDelegate`: forwards every CallKit callback to `SystemCallSession`, at once
  /// and synchronously, so the session's single inbox sees them in the order CallKit sent them.
  /// It decides nothing and settles nothing itself (except the group action, which is never
  /// offered): each action is handed over with a handle the session fulfils or fails.
  ///
  /// Audio goes the same way: `didActivate` / `didDeactivate` tell the session, and the session
  /// switches WebRTC's audio through its `CallMediaControl` (`WebRTCCallMedia`).
  public final class CallKitProviderDelegate: NSObject, CXProviderDelegate, Sendable {
    private let session: SystemCallSession

    public init(session: SystemCallSession) {
      self.session = session
    }

    // MARK: Lifecycle

    public func providerDidBegin(_ provider: CXProvider) {}

    public func providerDidReset(_ provider: CXProvider) {
      session.providerDidReset()
    }

    // MARK: Call actions

    public func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
      forward(action, .startCall)
    }

    public func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
      forward(action, .answer)
    }

    public func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
      forward(action, .end)
    }

    public func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) {
      forward(action, .setMuted(action.isMuted))
    }

    public func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) {
      forward(action, .setHeld(action.isOnHold))
    }

    public func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction) {
      // The core fails it (reports say DTMF is not supported).
      forward(action, .playDTMF(action.digits))
    }

    public func provider(_ provider: CXProvider, perform action: CXSetGroupCallAction) {
      // maximumCallsPerCallGroup is 1 and reports say grouping is not supported.
      action.fail()
    }

    /// CallKit gave up on an action (its `timeoutDate` passed). The session never settles it
    /// from now on; a timed-out answer ends the call here and over signaling.
    public func provider(_ provider: CXProvider, timedOutPerforming action: CXAction) {
      session.timedOutPerforming(actionId: action.uuid)
    }

    private func forward(_ action: CXCallAction, _ kind: SystemCallAction.Kind) {
      session.perform(
        SystemCallAction(id: action.uuid, callUUID: action.callUUID, kind: kind, timeoutDate: action.timeoutDate),
        handle: CallKitActionHandle(action))
    }

    // MARK: Audio session

    public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
      session.didActivateAudioSession()
    }

    public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
      session.didDeactivateAudioSession()
    }
  }

  /// Settles one CallKit action for the session.
  private struct CallKitActionHandle: SystemCallActionHandle, @unchecked Sendable {
    // @unchecked: CXAction is not Sendable-annotated; CallKit lets an action be settled from any
    // thread, and the session settles each one at most once.
    let action: CXCallAction

    init(_ action: CXCallAction) { self.action = action }

    func fulfill() {
      if let start = action as? CXStartCallAction {
        // The start date CallKit shows in Recents.
        start.fulfill(withDateStarted: Date())
      } else {
        action.fulfill()
      }
    }

    func fail() {
      action.fail()
    }
  }
#endif
