#if os(iOS)
  import DialtoneClient
  import UIKit

  /// Tells `SystemCallSession` whether the app is active, so a call's camera captures only when
  /// iOS lets it: a video call answered on the lock screen waits, its camera paused, until the
  /// user opens the app. Create it at launch, right after the session and before PushKit's
  /// registry: it reports the launch state at once (a push-launched app is in the background),
  /// then every change. Keep it as long as the session.
  @MainActor
  public final class ApplicationActivityObserver {
    // nonisolated(unsafe): written once in init, read only by deinit, when nothing else can.
    private nonisolated(unsafe) var observers: [any NSObjectProtocol] = []

    public init(session: SystemCallSession, application: UIApplication = .shared) {
      if application.applicationState == .active {
        session.applicationDidBecomeActive()
      } else {
        session.applicationDidEnterBackground()
      }
      let center = NotificationCenter.default
      observers = [
        center.addObserver(forName: UIApplication.didBecomeActiveNotification, object: nil, queue: .main) { _ in
          session.applicationDidBecomeActive()
        },
        center.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: .main) { _ in
          session.applicationDidEnterBackground()
        },
      ]
    }

    deinit {
      for observer in observers { NotificationCenter.default.removeObserver(observer) }
    }
  }
#endif
