import DialtoneCallKit
import DialtoneClient
import DialtoneSupport
import DialtoneURLSession
import DialtoneWebRTC
import Intents
import Network
import SwiftUI
import UIKit
import UserNotifications

/// Launch wiring; the example holds no call logic (that is `SystemCallSession`'s).
///
/// Order matters for a launch by a VoIP push: the CXProvider's delegate is set and the
/// session listens before PushKit's registry is created, because PushKit delivers the push as
/// soon as the registry has a delegate, and it must be reported before the delegate method
/// returns.
///
/// Before the first unlock after a reboot iOS may launch the app for a VoIP push while the
/// Keychain cannot be read (no installation id, no credentials): pushes are then reported and
/// ended at once (`PushesBeforeFirstUnlock`), and the rest is set up once the device is unlocked.
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate, ObservableObject {
  private(set) var session: SystemCallSession?
  /// nil until the device was unlocked once since it started.
  @Published private(set) var model: PhoneModel?
  private var callUI: CallKitSystemCallUI!
  private var providerDelegate: CallKitProviderDelegate?
  private var pushRegistry: PushKitRegistry?
  private var activity: ApplicationActivityObserver?
  private var pushesBeforeUnlock: PushesBeforeFirstUnlock?
  private var unlockObserver: (any NSObjectProtocol)?
  private let pathMonitor = NWPathMonitor()

  func application(
    _ application: UIApplication,
    didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil
  ) -> Bool {
    callUI = CallKitSystemCallUI(iconTemplateImageData: UIImage(named: "CallIcon")?.pngData())
    do {
      try setUp(installationId: InstallationID.current())
    } catch {
      // Before the first unlock: report and end pushes until the Keychain can be read.
      let pushes = PushesBeforeFirstUnlock(ui: callUI)
      pushes.start()
      pushesBeforeUnlock = pushes
      unlockObserver = NotificationCenter.default.addObserver(
        forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: .main
      ) { [weak self] _ in
        MainActor.assumeIsolated { self?.deviceUnlocked() }
      }
    }
    // The ordinary APNs token (didRegisterForRemoteNotificationsWithDeviceToken below), for
    // the "Missed call" notification; showing that notification needs the user's consent.
    application.registerForRemoteNotifications()
    Task { _ = try? await UNUserNotificationCenter.current().requestAuthorization(options: [.alert, .sound]) }
    return true
  }

  private func deviceUnlocked() {
    guard let installationId = try? InstallationID.current() else { return }
    pushesBeforeUnlock?.stop()
    pushesBeforeUnlock = nil
    if let unlockObserver { NotificationCenter.default.removeObserver(unlockObserver) }
    unlockObserver = nil
    setUp(installationId: installationId)
  }

  private func setUp(installationId: String) {
    // 1. WebRTC audio under CallKit's control: manual audio, off until CallKit activates it.
    let media = WebRTCCallMedia(factory: .shared)
    media.configure()

    // 2. The SDK objects. Nothing here touches the network. The token is the app backend's
    //    JWT for this user and installation.
    let tokens = TokenStore(installationId: installationId)
    let token: @Sendable () async throws -> String = { try await tokens.current() }
    let api = DialtoneAPIClient(baseURL: ExampleConfig.apiBaseURL, token: token)
    // The SDK's log in Console.app, under the app's subsystem.
    let log = Log(level: .info, subsystem: "", sink: OSLogSink(subsystem: Bundle.main.bundleIdentifier ?? "dialtone"))
    let signaling = SignalingClient(
      configuration: .init(url: ExampleConfig.signalingURL), transport: URLSessionSignalingTransport(), log: log,
      token: token)
    let iceServers = IceServerCache(defaults: ExampleConfig.defaultIceServers, fetcher: { try await api.iceServers() })
    let session = SystemCallSession(
      signaling: signaling, iceServers: iceServers, factory: WebRTCPeerConnectionFactory.shared, ui: callUI,
      media: media, deviceId: installationId, permissions: SystemMediaPermissions(), log: log)

    // 3. CallKit's delegate, the session's listeners, whether the app is active (a push-launched
    //    app is not: a video call answered now waits for the camera), then PushKit.
    let providerDelegate = CallKitProviderDelegate(session: session)
    callUI.setDelegate(providerDelegate)
    session.start()
    let activity = ApplicationActivityObserver(session: session)
    let pushRegistry = PushKitRegistry(
      session: session, api: api, installationId: installationId, log: log)
    pushRegistry.start()

    // 4. Every path update goes to the session (it ignores the first one and tells a Wi-Fi ↔
    //    cellular switch from it). `@Sendable`: the monitor calls it on its own queue, never on
    //    the main actor.
    pathMonitor.pathUpdateHandler = { @Sendable path in
      session.networkPathChanged(interfaces: path.status == .satisfied ? path.availableInterfaces.map(\.name) : [])
    }
    pathMonitor.start(queue: DispatchQueue(label: "dialtone.path"))

    self.providerDelegate = providerDelegate
    self.pushRegistry = pushRegistry
    self.activity = activity
    self.session = session
    self.model = PhoneModel(session: session, factory: .shared)
  }

  func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
    pushRegistry?.updateAlertToken(deviceToken)
  }

  func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error) {
    // The device still rings (VoIP pushes); it only gets no missed-call notification.
    print("dialtone: no alert token: \(error)")
  }

  /// Apps without scenes get the redial activity here; with the SwiftUI life cycle it arrives
  /// through `.onContinueUserActivity` below instead.
  func application(
    _ application: UIApplication, continue userActivity: NSUserActivity,
    restorationHandler: @escaping ([any UIUserActivityRestoring]?) -> Void
  ) -> Bool {
    redial(userActivity)
  }

  /// Redial from Recents (`includesCallsInRecents` is true), Contacts or Siri: an
  /// `INStartCallIntent` whose person handle is the `CXHandle` value CallKit recorded, the
  /// Dialtone user id.
  @discardableResult
  func redial(_ activity: NSUserActivity) -> Bool {
    guard let intent = activity.interaction?.intent as? INStartCallIntent,
      let person = intent.contacts?.first,
      let handle = person.personHandle?.value, !handle.isEmpty,
      let model
    else { return false }
    let name = ExampleConfig.contacts.first { $0.userId == handle }?.name ?? person.displayName
    let video = intent.callCapability == .videoCall
    model.call(userId: handle, name: name, video: video)
    return true
  }
}

@main
struct DialtoneExampleApp: App {
  @UIApplicationDelegateAdaptor(AppDelegate.self) private var appDelegate
  @Environment(\.scenePhase) private var scenePhase

  var body: some Scene {
    WindowGroup {
      RootView()
        .onContinueUserActivity(NSStringFromClass(INStartCallIntent.self)) { activity in
          _ = appDelegate.redial(activity)
        }
    }
    .onChange(of: scenePhase) { _, phase in
      // In the foreground the app is online; a push-launched app goes online only once CallKit
      // has accepted the pushed call's report.
      if phase == .active, let session = appDelegate.session {
        Task { await session.goOnline() }
      }
    }
  }
}

/// The app's screen once the device was unlocked (the SDK is set up then); the delegate is in
/// the environment because it is an `ObservableObject`.
struct RootView: View {
  @EnvironmentObject private var app: AppDelegate

  var body: some View {
    if let model = app.model {
      ContentView(model: model)
    } else {
      Text("Unlock your device to make and take calls.")
    }
  }
}
