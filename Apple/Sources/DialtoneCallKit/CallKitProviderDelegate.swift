#if os(iOS)
import AVFoundation
import CallKit
import DialtoneClient
import DialtoneWebRTC
import Foundation

/// The `CXProviderDelegate`: forwards every system action to `IncomingCallCoordinator` and
/// fulfils or fails it with the coordinator's answer. It decides nothing itself.
///
/// The answer action is fulfilled only once the call is connected (`performAnswer` waits for
/// `callConnected`, rule 5) and failed if it cannot connect in time. Audio: `didActivate`
/// hands the session to WebRTC (`CallAudioSession`, manual audio) and tells the coordinator,
/// which tells the app; `didDeactivate` does the reverse.
public final class CallKitProviderDelegate: NSObject, CXProviderDelegate, @unchecked Sendable {
  private let coordinator: IncomingCallCoordinator
  /// Optional hook for the app's logs (timeouts, failed actions).
  public var log: (@Sendable (String) -> Void)?

  public init(coordinator: IncomingCallCoordinator) {
    self.coordinator = coordinator
  }

  // MARK: Lifecycle

  public func providerDidBegin(_ provider: CXProvider) {}

  public func providerDidReset(_ provider: CXProvider) {
    let coordinator = coordinator
    Task { await coordinator.providerDidReset() }
  }

  // MARK: Call actions

  public func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
    let coordinator = coordinator
    let box = ActionBox(action)
    Task {
      if await coordinator.performStartCall(uuid: box.action.callUUID) {
        box.action.fulfill(withDateStarted: Date())
      } else {
        box.action.fail()
      }
    }
  }

  public func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
    settle(action) { coordinator, action in await coordinator.performAnswer(uuid: action.callUUID) }
  }

  public func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
    settle(action) { coordinator, action in await coordinator.performEnd(uuid: action.callUUID) }
  }

  public func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) {
    settle(action) { coordinator, action in await coordinator.performSetMuted(uuid: action.callUUID, muted: action.isMuted) }
  }

  public func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) {
    settle(action) { coordinator, action in await coordinator.performSetHeld(uuid: action.callUUID, held: action.isOnHold) }
  }

  public func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction) {
    settle(action) { coordinator, action in await coordinator.performPlayDTMF(uuid: action.callUUID, digits: action.digits) }
  }

  /// Asks the coordinator off CallKit's queue, then fulfils the action if it said yes, else fails it.
  private func settle<Action: CXAction>(
    _ action: Action, _ perform: @escaping @Sendable (IncomingCallCoordinator, Action) async -> Bool
  ) {
    let coordinator = coordinator
    let box = ActionBox(action)
    Task { await perform(coordinator, box.action) ? box.action.fulfill() : box.action.fail() }
  }

  public func provider(_ provider: CXProvider, perform action: CXSetGroupCallAction) {
    // maximumCallsPerCallGroup is 1: grouping is not offered.
    action.fail()
  }

  public func provider(_ provider: CXProvider, timedOutPerforming action: CXAction) {
    // The system fails the action itself; the coordinator's own timers end the call.
    log?("CallKit timed out performing \(type(of: action)) for \((action as? CXCallAction)?.callUUID.uuidString ?? "?")")
  }

  // MARK: Audio session (rule 5)

  public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
    CallAudioSession.shared.didActivate(audioSession)
    let coordinator = coordinator
    Task { await coordinator.didActivateAudioSession() }
  }

  public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
    CallAudioSession.shared.didDeactivate(audioSession)
    let coordinator = coordinator
    Task { await coordinator.didDeactivateAudioSession() }
  }
}

/// Carries a CallKit action into a Task. CXAction is not annotated Sendable; CallKit allows
/// fulfilling or failing an action from any thread, once.
private struct ActionBox<Action: CXAction>: @unchecked Sendable {
  let action: Action
  init(_ action: Action) { self.action = action }
}
#endif
