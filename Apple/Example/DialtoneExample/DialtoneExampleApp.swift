import DialtoneCallKit
import DialtoneClient
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
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate {
  let installationId = InstallationID.current
  private(set) var session: SystemCallSession!
  private(set) var model: PhoneModel!
  private var callUI: CallKitSystemCallUI!
  private var providerDelegate: CallKitProviderDelegate!
  private var pushRegistry: PushKitRegistry!
  private var activity: ApplicationActivityObserver!
  private let pathMonitor = NWPathMonitor()

  func application(
    _ application: UIApplication,
    didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil
  ) -> Bool {
    // 1. WebRTC audio under CallKit's control: manual audio, off until CallKit activates it.
    let media = WebRTCCallMedia(factory: .shared)
    media.configure()

    // 2. The SDK objects. Nothing here touches the network. The token is the app backend's
    //    JWT for this user and installation.
    let tokens = TokenStore(installationId: installationId)
    let token: @Sendable () async throws -> String = { try await tokens.current() }
    let api = DialtoneAPIClient(baseURL: ExampleConfig.apiBaseURL, token: token)
    let signaling = SignalingClient(
      configuration: .init(url: ExampleConfig.signalingURL), transport: URLSessionSignalingTransport(), token: token)
    let iceServers = IceServerCache(defaults: ExampleConfig.defaultIceServers, fetcher: { try await api.iceServers() })
    let callUI = CallKitSystemCallUI(iconTemplateImageData: UIImage(named: "CallIcon")?.pngData())
    let session = SystemCallSession(
      signaling: signaling, iceServers: iceServers, factory: WebRTCPeerConnectionFactory.shared, ui: callUI,
      media: media, deviceId: installationId, permissions: SystemMediaPermissions())

    // 3. CallKit's delegate, the session's listeners, whether the app is active (a push-launched
    //    app is not: a video call answered now waits for the camera), then PushKit.
    let providerDelegate = CallKitProviderDelegate(session: session)
    callUI.setDelegate(providerDelegate)
    session.start()
    let activity = ApplicationActivityObserver(session: session)
    let pushRegistry = PushKitRegistry(
      session: session, api: api, installationId: installationId, log: { print("dialtone: \($0)") })
    pushRegistry.start()

    // 4. The ordinary APNs token (didRegisterForRemoteNotificationsWithDeviceToken below), for
    //    the "Missed call" notification; showing that notification needs the user's consent.
    application.registerForRemoteNotifications()
    Task { _ = try? await UNUserNotificationCenter.current().requestAuthorization(options: [.alert, .sound]) }

    // 5. Every path update goes to the session (it ignores the first one and tells a Wi-Fi ↔
    //    cellular switch from it). `@Sendable`: the monitor calls it on its own queue, never on
    //    the main actor.
    pathMonitor.pathUpdateHandler = { @Sendable path in
      session.networkPathChanged(interfaces: path.status == .satisfied ? path.availableInterfaces.map(\.name) : [])
    }
    pathMonitor.start(queue: DispatchQueue(label: "dialtone.path"))

    self.callUI = callUI
    self.providerDelegate = providerDelegate
    self.pushRegistry = pushRegistry
    self.activity = activity
    self.session = session
    self.model = PhoneModel(session: session, factory: .shared)
    return true
  }

  func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
    pushRegistry.updateAlertToken(deviceToken)
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
      ContentView(model: appDelegate.model)
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
