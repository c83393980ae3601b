import DialtoneProtocol
import DialtonePush
import Foundation

/// One registered installation of a user: where pushes for it go.
public struct StoredDevice: Sendable, Equatable {
  public let userId: String
  public let installationId: String
  /// The signaling device id (the token's `device` claim) the installation registered with.
  public let deviceId: String
  public let platform: PushPlatform
  public let tokens: [PushToken]
  public let updatedAt: Int64

  public func token(_ kind: PushTokenKind) -> PushToken? { tokens.first { $0.kind == kind } }

  public var info: DeviceInfo {
    let apns = token(.voip) ?? token(.alert)
    return DeviceInfo(
      installationId: installationId, deviceId: deviceId, platform: platform, bundleId: apns?.topic,
      apnsEnvironment: apns?.environment.flatMap(APNsEnvironment.init(rawValue:)), hasVoipToken: token(.voip) != nil,
      hasAlertToken: token(.alert) != nil, hasFcmToken: token(.fcm) != nil, updatedAt: updatedAt)
  }
}

/// The push-token registry. A token lives in at most one installation: registering it again
/// (reinstall, another user on the same phone) moves it, so stale duplicates never get pushes.
public protocol DeviceStore: Sendable {
  /// Replaces the installation's registration with exactly these tokens.
  func upsert(
    installationId: String, platform: PushPlatform, tokens: [PushToken], userId: String, deviceId: String,
    now: Int64
  ) async throws -> StoredDevice
  /// False when the user has no such installation.
  func remove(installationId: String, userId: String) async throws -> Bool
  func devices(of userId: String) async throws -> [StoredDevice]
  /// Forgets a token a push provider reported as invalid.
  func removeToken(_ token: String, kind: PushTokenKind) async throws
}

extension DeviceRegistration {
  /// The registration's tokens as rows (protocol.md section 16.6).
  public var pushTokens: [PushToken] {
    var tokens: [PushToken] = []
    let environment = apnsEnvironment?.rawValue
    if let voipToken {
      tokens.append(PushToken(kind: .voip, token: voipToken, topic: bundleId, environment: environment))
    }
    if let alertToken {
      tokens.append(PushToken(kind: .alert, token: alertToken, topic: bundleId, environment: environment))
    }
    if let fcmToken { tokens.append(PushToken(kind: .fcm, token: fcmToken)) }
    return tokens
  }
}

/// Everything the server persists.
public typealias ServerStore = CallStore & DeviceStore & GroupCallStore & QualityStore & BlockStore & DirectoryStore
