import DialtoneProtocol
import Foundation

/// One registered installation of a user: where pushes for it go.
public struct StoredDevice: Sendable, Equatable {
  public let userId: String
  /// The signaling device id (the token's `device` claim) the installation registered with.
  public let deviceId: String
  public let registration: DeviceRegistration
  public let updatedAt: Int64

  public var info: DeviceInfo { DeviceInfo(registration, deviceId: deviceId, updatedAt: updatedAt) }
}

public enum PushTokenKind: String, Sendable, CaseIterable {
  case voip, alert, fcm
}

/// The push-token registry. A token lives in at most one installation: registering it again
/// (reinstall, another user on the same phone) moves it, so stale duplicates never get pushes.
public protocol DeviceStore: Sendable {
  func upsert(_ registration: DeviceRegistration, userId: String, deviceId: String, now: Int64) async throws -> StoredDevice
  /// False when the user has no such installation.
  func remove(installationId: String, userId: String) async throws -> Bool
  func devices(of userId: String) async throws -> [StoredDevice]
  /// Forgets a token APNs or FCM reported as invalid.
  func removeToken(_ token: String, kind: PushTokenKind) async throws
}

/// Everything the server persists.
public typealias ServerStore = CallStore & DeviceStore
