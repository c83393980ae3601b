import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The two device calls of the HTTP API (protocol.md section 16.6) that push registration needs.
public protocol DeviceRegistrationAPI: Sendable {
  /// `POST /v1/devices`: replaces the installation's whole registration.
  func register(_ registration: DeviceRegistration) async throws
  /// `DELETE /v1/devices/{installationId}` (already gone counts as done).
  func unregister(installationId: String) async throws
}

/// This installation's push tokens on the server.
///
/// - A `POST` replaces the whole registration, so every one carries both tokens; when the
///   VoIP token is invalidated the alert token is re-posted alone, or the registration is
///   deleted when there is none.
/// - One request at a time; changes made while one is in flight are sent together after it,
///   and a state the server already has is not sent again.
/// - A failed request is not retried in a loop: PushKit hands the token over again at the next
///   launch, which registers again.
public actor DeviceRegistrations {
  private struct Tokens: Equatable {
    var voip: String?
    var alert: String?
  }

  public let installationId: String
  private let api: any DeviceRegistrationAPI
  private let platform: PushPlatform
  private let bundleId: String?
  private let apnsEnvironment: APNsEnvironment?
  private let log: Log
  private var wanted = Tokens()
  /// What the server is known to hold (nil: unknown, e.g. after a failure or at launch).
  private var registered: Tokens?
  private var worker: Task<Void, Never>?

  public init(
    api: any DeviceRegistrationAPI, installationId: String, platform: PushPlatform = .ios, bundleId: String?,
    apnsEnvironment: APNsEnvironment?, log: Log = .silent
  ) {
    self.api = api
    self.installationId = installationId
    self.platform = platform
    self.bundleId = bundleId
    self.apnsEnvironment = apnsEnvironment
    self.log = log.scoped("push")
  }

  /// PushKit's `didUpdate` (a token) or `didInvalidatePushTokenFor` (nil).
  public func setVoIPToken(_ token: String?) {
    wanted.voip = token
    sync()
  }

  /// The ordinary APNs token (`didRegisterForRemoteNotificationsWithDeviceToken`), for the
  /// missed-call notification (protocol.md section 17.2).
  public func setAlertToken(_ token: String?) {
    wanted.alert = token
    sync()
  }

  /// Waits until every change made so far has been sent (or failed).
  public func settled() async {
    while let worker { await worker.value }
  }

  /// Lower-case hex of a push token, as `POST /v1/devices` expects.
  public nonisolated static func hex(_ token: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in token {
      out.append(digits[Int(byte >> 4)])
      out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
  }

  private func sync() {
    guard worker == nil, wanted != registered else { return }
    worker = Task { await self.drain() }
  }

  private func drain() async {
    while wanted != registered {
      let tokens = wanted
      do {
        if tokens.voip == nil && tokens.alert == nil {
          try await api.unregister(installationId: installationId)
        } else {
          try await api.register(
            DeviceRegistration(
              installationId: installationId, platform: platform, voipToken: tokens.voip, alertToken: tokens.alert,
              bundleId: bundleId, apnsEnvironment: apnsEnvironment))
        }
        registered = tokens
      } catch {
        registered = nil
        log.warning("device registration failed: \(error)")
        // Retried by the next change or the next launch, not in a loop against a failing server.
        if wanted == tokens { break }
      }
    }
    worker = nil
  }
}
