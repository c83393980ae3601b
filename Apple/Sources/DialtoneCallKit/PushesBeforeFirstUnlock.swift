#if os(iOS)
  import DialtoneClient
  import Foundation
  import PushKit

  /// PushKit while the app cannot take calls: before the first unlock after a reboot, iOS may
  /// launch the app for a VoIP push, but the Keychain (`InstallationID`, the app's credentials)
  /// cannot be read, so no call can connect. Every VoIP push is still reported to CallKit, as
  /// iOS requires (showing who called), and ended at once as failed
  /// (`SystemCallCoordinator.reportPlanWhileLocked`); no token is registered. The call rings on
  /// on the user's other devices.
  ///
  /// Use it in place of `PushKitRegistry` when `InstallationID.current()` throws
  /// `.unavailableBeforeFirstUnlock`, with the CXProvider's UI; once protected data becomes
  /// available (`UIApplication.protectedDataDidBecomeAvailableNotification`), `stop()` it and set
  /// up the session and `PushKitRegistry` as at any launch.
  public final class PushesBeforeFirstUnlock: NSObject, PKPushRegistryDelegate {
    private let ui: any SystemCallUI
    private var registry: PKPushRegistry?

    public init(ui: any SystemCallUI) {
      self.ui = ui
    }

    /// Creates the registry (a push that launched the app is delivered right after this).
    public func start(queue: DispatchQueue = .main) {
      guard registry == nil else { return }
      let registry = PKPushRegistry(queue: queue)
      registry.delegate = self
      registry.desiredPushTypes = [.voIP]
      self.registry = registry
    }

    /// Hands PushKit over (to `PushKitRegistry`, which makes its own registry).
    public func stop() {
      registry?.delegate = nil
      registry = nil
    }

    public func pushRegistry(
      _ registry: PKPushRegistry, didUpdate pushCredentials: PKPushCredentials, for type: PKPushType
    ) {
      // Registered by PushKitRegistry, which PushKit hands the token to again.
    }

    public func pushRegistry(
      _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
      completion: @escaping () -> Void
    ) {
      if type == .voIP {
        let report = SystemCallCoordinator.reportPlanWhileLocked(for: payload.dictionaryPayload)
        let ui = ui
        ui.reportNewIncomingCall(report) { _ in
          ui.reportCallEnded(uuid: report.uuid, reason: report.endAtOnce ?? .failed)
        }
      }
      completion()
    }
  }
#endif
