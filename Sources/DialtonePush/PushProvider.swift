import DialtoneProtocol

/// What a push says.
public enum PushMessage: Sendable {
  case incomingCall(IncomingCallPush)
  case missedCall(MissedCallPush)

  public var purpose: PushPurpose {
    switch self {
    case .incomingCall: return .incomingCall
    case .missedCall: return .missedCall
    }
  }
}

public enum PushPurpose: Sendable, Hashable {
  /// Wakes the device to ring (VoIP push, high-priority data message).
  case incomingCall
  /// An ordinary notification after a missed call.
  case missedCall
}

/// A push service (APNs, FCM, …). A new provider is one file: its token kind(s), this
/// conformance, and a line where `PushSetup` builds the providers; plus validating its token
/// in the registration.
public protocol PushProvider: Sendable {
  /// The token kinds this provider delivers, each with the one message it is for.
  var purposes: [PushTokenKind: PushPurpose] { get }
  func send(_ message: PushMessage, to token: PushToken) async -> PushOutcome
}
