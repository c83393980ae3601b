import Foundation

/// Which service delivers a push token, and for what. Extensible: a new push provider declares
/// its kind next to itself (`extension PushTokenKind { static let webPush = … }`).
public struct PushTokenKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  public let rawValue: String
  public init(rawValue: String) { self.rawValue = rawValue }
  public var description: String { rawValue }

  /// An APNs VoIP (PushKit) token: incoming calls.
  public static let voip = PushTokenKind(rawValue: "voip")
  /// An ordinary APNs token: the missed-call notification.
  public static let alert = PushTokenKind(rawValue: "alert")
  /// An FCM registration token: incoming calls.
  public static let fcm = PushTokenKind(rawValue: "fcm")
}

/// One push token of an installation, as stored: one row each.
public struct PushToken: Sendable, Hashable {
  public var kind: PushTokenKind
  public var token: String
  /// The provider's name for the app (APNs: the bundle id; the provider adds `.voip`).
  public var topic: String?
  /// The provider's environment (APNs: `sandbox` or `production`).
  public var environment: String?

  public init(kind: PushTokenKind, token: String, topic: String? = nil, environment: String? = nil) {
    self.kind = kind
    self.token = token
    self.topic = topic
    self.environment = environment
  }
}
