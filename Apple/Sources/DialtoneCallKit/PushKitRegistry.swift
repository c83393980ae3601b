#if os(iOS)
import DialtoneClient
import DialtoneProtocol
import DialtoneURLSession
import Foundation
import PushKit

/// PushKit for VoIP pushes: registers the VoIP token with the Dialtone server and hands every
/// incoming push to `IncomingCallCoordinator`.
///
/// Create and `start()` it in `application(_:didFinishLaunchingWithOptions:)`, after the
/// CXProvider's delegate is set: when a push launches a killed app, PushKit delivers it as
/// soon as a registry with a delegate exists.
public final class PushKitRegistry: NSObject, PKPushRegistryDelegate, @unchecked Sendable {
  private let coordinator: IncomingCallCoordinator
  private let queue: DispatchQueue
  private var registry: PKPushRegistry?
  private let registrations: DeviceRegistrations
  /// Optional hook for the app's logs (registration failures).
  public var log: (@Sendable (String) -> Void)? {
    didSet {
      let log = log
      let registrations = registrations
      Task { await registrations.setLog(log) }
    }
  }

  /// - Parameters:
  ///   - installationId: stable per installation (`InstallationID.current`); should be the
  ///     `device` claim of the app's tokens.
  ///   - bundleId: the app's bundle id, without `.voip` (default: `Bundle.main`).
  ///   - apnsEnvironment: default: read from the embedded provisioning profile
  ///     (`APNsEnvironmentDetector`).
  ///   - queue: where PushKit calls the delegate; main by default.
  public init(
    coordinator: IncomingCallCoordinator, api: DialtoneAPIClient, installationId: String,
    bundleId: String? = Bundle.main.bundleIdentifier, apnsEnvironment: APNsEnvironment = APNsEnvironmentDetector.current,
    queue: DispatchQueue = .main
  ) {
    self.coordinator = coordinator
    self.queue = queue
    registrations = DeviceRegistrations(
      api: api, installationId: installationId, bundleId: bundleId ?? "", apnsEnvironment: apnsEnvironment)
  }

  /// Creates the registry. Call once, from the main thread, during launch: a push that
  /// launched the app is delivered right after this.
  public func start() {
    guard registry == nil else { return }
    let registry = PKPushRegistry(queue: queue)
    registry.delegate = self
    registry.desiredPushTypes = [.voIP]
    self.registry = registry
  }

  // MARK: PKPushRegistryDelegate

  public func pushRegistry(_ registry: PKPushRegistry, didUpdate pushCredentials: PKPushCredentials, for type: PKPushType) {
    guard type == .voIP else { return }
    let token = Self.hex(pushCredentials.token)
    let registrations = registrations
    Task { await registrations.set(voipToken: token) }
  }

  public func pushRegistry(_ registry: PKPushRegistry, didInvalidatePushTokenFor type: PKPushType) {
    guard type == .voIP else { return }
    let registrations = registrations
    Task { await registrations.set(voipToken: nil) }
  }

  /// The ordinary APNs token (for missed-call notifications, protocol.md section 15.2), from
  /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`. Optional: without
  /// it the device still rings, it just gets no "Missed call" notification.
  public func updateAlertToken(_ deviceToken: Data) {
    let token = Self.hex(deviceToken)
    let registrations = registrations
    Task { await registrations.set(alertToken: token) }
  }

  /// Rule 1: the push is decoded synchronously (no network) and reported to CallKit by the
  /// coordinator before it asks signaling to connect; PushKit's completion is called only
  /// after the report. Pushes that are not VoIP are completed at once.
  public func pushRegistry(
    _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
    completion: @escaping () -> Void
  ) {
    guard type == .voIP else {
      completion()
      return
    }
    // `decode` is `handleVoIPPush(payload:)`'s first step, done here so only a Sendable value
    // crosses into the Task.
    let push = IncomingCallCoordinator.decode(payload: payload.dictionaryPayload)
    let coordinator = coordinator
    let done = CompletionBox(completion)
    Task {
      _ = await coordinator.handleVoIPPush(push)
      done.call()
    }
  }

  /// Lower-case hex, as `POST /v1/devices` expects.
  public static func hex(_ token: Data) -> String {
    token.map { String(format: "%02x", $0) }.joined()
  }
}

/// This installation's tokens on the server (`POST` / `DELETE /v1/devices`), one request at a
/// time. A POST replaces the whole registration (protocol.md section 14.5), so it always
/// carries both tokens; when the VoIP token is invalidated the registration is re-posted
/// with the alert token alone, or deleted when there is none.
actor DeviceRegistrations {
  private let api: DialtoneAPIClient
  private let installationId: String
  private let bundleId: String
  private let apnsEnvironment: APNsEnvironment
  private var voipToken: String?
  private var alertToken: String?
  private var log: (@Sendable (String) -> Void)?
  private var tail: Task<Void, Never>?

  init(api: DialtoneAPIClient, installationId: String, bundleId: String, apnsEnvironment: APNsEnvironment) {
    self.api = api
    self.installationId = installationId
    self.bundleId = bundleId
    self.apnsEnvironment = apnsEnvironment
  }

  func setLog(_ log: (@Sendable (String) -> Void)?) { self.log = log }

  func set(voipToken: String?) {
    guard voipToken != self.voipToken || voipToken != nil else { return }
    self.voipToken = voipToken
    sync()
  }

  func set(alertToken: String) {
    self.alertToken = alertToken
    sync()
  }

  /// Queues a request for the current tokens behind the previous one.
  private func sync() {
    let previous = tail
    let api = api
    let installationId = installationId
    let log = log
    let registration: DeviceRegistration? =
      voipToken == nil && alertToken == nil
      ? nil
      : DeviceRegistration(
        installationId: installationId, platform: .ios, voipToken: voipToken, alertToken: alertToken,
        bundleId: bundleId, apnsEnvironment: apnsEnvironment)
    tail = Task {
      await previous?.value
      do {
        if let registration {
          try await api.registerDevice(registration)
        } else {
          try await api.unregisterDevice(installationId: installationId)
        }
      } catch {
        // PushKit calls didUpdate again at the next launch: that retries.
        log?("device registration failed: \(error)")
      }
    }
  }
}

/// PushKit's completion handler is not annotated Sendable; it may be called from any thread.
private struct CompletionBox: @unchecked Sendable {
  let call: () -> Void
  init(_ call: @escaping () -> Void) { self.call = call }
}

/// A stable id for this app installation, kept in user defaults: a reinstall gets a new id,
/// which is what push registration wants (the old installation's tokens are dead anyway).
public enum InstallationID {
  private static let key = "dialtone.installationId"

  public static var current: String {
    if let id = UserDefaults.standard.string(forKey: key) { return id }
    let id = UUID().uuidString
    UserDefaults.standard.set(id, forKey: key)
    return id
  }
}

/// Which APNs environment this build's push tokens belong to.
///
/// Development-signed builds (Xcode runs) carry `aps-environment = development` in their
/// embedded provisioning profile → `.sandbox`; ad-hoc and TestFlight builds carry
/// `production`; App Store builds have no embedded profile → `.production`.
public enum APNsEnvironmentDetector {
  public static let current: APNsEnvironment = detect()

  static func detect() -> APNsEnvironment {
    #if targetEnvironment(simulator)
    return .sandbox
    #else
    guard let url = Bundle.main.url(forResource: "embedded", withExtension: "mobileprovision"),
      let data = try? Data(contentsOf: url)
    else { return .production }
    return environment(inProfile: data) ?? .production
    #endif
  }

  /// Reads `Entitlements.aps-environment` from a provisioning profile (a CMS envelope around
  /// an XML plist, which is extracted without verifying the signature).
  static func environment(inProfile data: Data) -> APNsEnvironment? {
    let text = String(decoding: data, as: UTF8.self)
    guard let start = text.range(of: "<?xml"), let end = text.range(of: "</plist>", range: start.upperBound..<text.endIndex)
    else { return nil }
    let plistData = Data(text[start.lowerBound..<end.upperBound].utf8)
    guard let plist = try? PropertyListSerialization.propertyList(from: plistData, format: nil) as? [String: Any],
      let entitlements = plist["Entitlements"] as? [String: Any],
      let value = entitlements["aps-environment"] as? String
    else { return nil }
    return value == "development" ? .sandbox : .production
  }
}
#endif
