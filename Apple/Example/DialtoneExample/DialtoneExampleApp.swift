import DialtoneCallKit
import DialtoneClient
import DialtoneURLSession
import DialtoneWebRTC
import SwiftUI
import UIKit

/// Launch wiring. Order matters for a launch by a VoIP push: the CXProvider's delegate and
/// the coordinator exist before PushKit's registry is created, because PushKit delivers the
/// push as soon as the registry has a delegate.
@MainActor
final class AppDelegate: NSObject, UIApplicationDelegate {
  let installationId = InstallationID.current
  private(set) var service: CallService!
  private(set) var model: PhoneModel!
  private(set) var coordinator: IncomingCallCoordinator!
  private var callUI: CallKitSystemCallUI!
  private var providerDelegate: CallKitProviderDelegate!
  private var pushRegistry: PushKitRegistry!

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil
  ) -> Bool {
    // 1. WebRTC audio under CallKit's control (manual audio; enabled only in didActivate).
    CallAudioSession.shared.configure()

    // 2. SDK objects. The token is the app backend's JWT for this user and installation.
    let tokens = TokenStore(installationId: installationId)
    let token: @Sendable () async throws -> String = { try await tokens.current() }
    let api = DialtoneAPIClient(baseURL: ExampleConfig.apiBaseURL, token: token)
    let callUI = CallKitSystemCallUI(iconTemplateImageData: UIImage(named: "CallIcon")?.pngData())
    let service = CallService(ui: callUI, token: token, api: api)
    let coordinator = IncomingCallCoordinator(deviceId: installationId, ui: callUI, signaling: service)
    service.bind(coordinator)

    // 3. CallKit delegate, then PushKit (see the type comment).
    let providerDelegate = CallKitProviderDelegate(coordinator: coordinator)
    callUI.setDelegate(providerDelegate)
    let pushRegistry = PushKitRegistry(coordinator: coordinator, api: api, installationId: installationId)
    pushRegistry.start()

    self.callUI = callUI
    self.service = service
    self.model = PhoneModel(service: service)
    self.coordinator = coordinator
    self.providerDelegate = providerDelegate
    self.pushRegistry = pushRegistry
    Task { await service.start() }
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
    }
    .onChange(of: scenePhase) { _, phase in
      // In the foreground the app is online; a push-launched app goes online only after the
      // coordinator reported the call (CallService.connectForPushedCall).
      if phase == .active, let service = appDelegate.service {
        Task { await service.goOnline() }
      }
    }
  }
}
