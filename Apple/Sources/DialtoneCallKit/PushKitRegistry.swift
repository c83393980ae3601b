#if os(iOS)
  import DialtoneClient
  import DialtoneProtocol
  import DialtoneSupport
  import Foundation
  import PushKit

  /// PushKit for VoIP pushes: hands every incoming push to `SystemCallSession` synchronously and
  /// keeps this installation's push tokens on the server (`DeviceRegistrations`).
  ///
  /// Create it, and call `start()`, in `application(_:didFinishLaunchingWithOptions:)` after the
  /// CXProvider's delegate is set and `SystemCallSession.start()` was called: when a push
  /// launches a killed app, PushKit delivers it as soon as a registry with a delegate exists.
  public final class PushKitRegistry: NSObject, PKPushRegistryDelegate {
    public let registrations: DeviceRegistrations
    private let session: SystemCallSession
    private let queue: DispatchQueue
    private var registry: PKPushRegistry?

    /// - Parameters:
    ///   - api: `DialtoneAPIClient` (or any `DeviceRegistrationAPI`).
    ///   - installationId: stable per installation (`InstallationID.current`); the `device` claim
    ///     of the app's tokens and the session's `deviceId`.
    ///   - bundleId: the app's bundle id, without `.voip` (default: `Bundle.main`).
    ///   - apnsEnvironment: default: read from the embedded provisioning profile
    ///     (`APNsEnvironmentDetector`).
    ///   - queue: where PushKit calls the delegate; main by default.
    ///   - log: registration failures (the same `Log` as the session's, e.g. an `OSLogSink`).
    public init(
      session: SystemCallSession, api: any DeviceRegistrationAPI, installationId: String,
      bundleId: String? = Bundle.main.bundleIdentifier,
      apnsEnvironment: APNsEnvironment = APNsEnvironmentDetector.current,
      queue: DispatchQueue = .main, log: Log = .silent
    ) {
      self.session = session
      self.queue = queue
      registrations = DeviceRegistrations(
        api: api, installationId: installationId, platform: .ios, bundleId: bundleId, apnsEnvironment: apnsEnvironment,
        log: log)
    }

    /// Creates the registry. Call once, on the main thread, during launch: a push that launched
    /// the app is delivered right after this.
    public func start() {
      guard registry == nil else { return }
      let registry = PKPushRegistry(queue: queue)
      registry.delegate = self
      registry.desiredPushTypes = [.voIP]
      self.registry = registry
    }

    /// The ordinary APNs token, from
    /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`, for the missed-call
    /// notification (protocol.md section 17.2). Without it the device still rings; it just gets
    /// no "Missed call" notification.
    public func updateAlertToken(_ deviceToken: Data) {
      let token = DeviceRegistrations.hex(deviceToken)
      let registrations = registrations
      Task { await registrations.setAlertToken(token) }
    }

    // MARK: PKPushRegistryDelegate: tokens

    public func pushRegistry(
      _ registry: PKPushRegistry, didUpdate pushCredentials: PKPushCredentials, for type: PKPushType
    ) {
      guard type == .voIP else { return }
      let token = DeviceRegistrations.hex(pushCredentials.token)
      let registrations = registrations
      Task { await registrations.setVoIPToken(token) }
    }

    public func pushRegistry(_ registry: PKPushRegistry, didInvalidatePushTokenFor type: PKPushType) {
      guard type == .voIP else { return }
      let registrations = registrations
      Task { await registrations.setVoIPToken(nil) }
    }

    // MARK: PKPushRegistryDelegate: incoming pushes

    /// iOS terminates an app that returns from here without having reported the VoIP push to
    /// CallKit. `receiveVoIPPush` decodes the payload and calls `reportNewIncomingCall` before it
    /// returns (no network, no suspension); signaling connects only once CallKit has answered
    /// the report. A malformed payload is reported too, and ended at once.
    public func pushRegistry(
      _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
      completion: @escaping () -> Void
    ) {
      if type == .voIP {
        session.receiveVoIPPush(payload.dictionaryPayload)
      }
      completion()
    }

    // iOS 26.4 adds this variant; its metadata says whether this push must be reported.
    // Whether the SDK declares `PKVoIPPushMetadata` cannot be asked at compile time: neither
    // `#if compiler` nor `#if canImport(PushKit)` says which SDK is in use, and `@available` only
    // guards the call at run time. So the method is compiled only when the build says its SDK is
    // iOS 26.4 or later: `DIALTONE_IOS26_4_SDK`, which Apple/Package.swift defines when the
    // environment that resolves the package sets `DIALTONE_IOS26_4_SDK=1` (docs/ios.md, section
    // 3). Without it every push goes through the method above, which reports it (always
    // allowed). Both completion parameters are declared without `@Sendable`, which matches the
    // SDK whether or not it marks them `@Sendable` (a witness that does not match would silently
    // never be called).
    #if DIALTONE_IOS26_4_SDK
      @available(iOS 26.4, *)
      public func pushRegistry(
        _ registry: PKPushRegistry, didReceiveIncomingVoIPPushWith payload: PKPushPayload, metadata: PKVoIPPushMetadata,
        withCompletionHandler completion: @escaping () -> Void
      ) {
        session.receiveVoIPPush(payload.dictionaryPayload, mustReport: metadata.mustReport)
        completion()
      }
    #endif
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
      guard let start = text.range(of: "<?xml"),
        let end = text.range(of: "</plist>", range: start.upperBound..<text.endIndex)
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
