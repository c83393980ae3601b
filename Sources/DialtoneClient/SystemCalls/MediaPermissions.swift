/// A capture device a call needs the user's permission for.
public enum MediaDevice: String, Sendable, Equatable, CaseIterable {
  case microphone
  case camera
}

/// What the OS lets the app do with a capture device.
public enum MediaAuthorization: String, Sendable, Equatable {
  /// Never asked. The OS shows its prompt at the first request, and only while the app is in
  /// the foreground: never over the lock screen, where a pushed call is answered.
  case notDetermined
  /// Refused by the user (or by a device policy): only the Settings app can change it.
  case denied
  case granted
}

/// The OS's capture permissions: on iOS, `AVAudioApplication` (the microphone) and
/// `AVCaptureDevice` (the camera), in `Apple/` (`SystemMediaPermissions`). It only reads and
/// asks; what a call may do with the answer is `MediaAccess`'s.
public protocol MediaPermissions: Sendable {
  /// The current state, without asking.
  func authorization(for device: MediaDevice) -> MediaAuthorization
  /// Shows the OS prompt when the state is not determined, and returns the state that results
  /// (at once when it is determined). Call it in the foreground.
  func requestAccess(to device: MediaDevice) async -> MediaAuthorization
}

/// The microphone's and the camera's permission, and what they allow a call.
public struct MediaAccess: Sendable, Equatable {
  public var microphone: MediaAuthorization
  public var camera: MediaAuthorization

  public init(microphone: MediaAuthorization, camera: MediaAuthorization) {
    self.microphone = microphone
    self.camera = camera
  }

  /// A device with nothing to ask (headless, or no `MediaPermissions` given).
  public static let unrestricted = MediaAccess(microphone: .granted, camera: .granted)

  /// The devices a call would use that are still to be asked for (the camera for video only).
  public func toAsk(video: Bool) -> [MediaDevice] {
    var devices: [MediaDevice] = []
    if microphone == .notDetermined { devices.append(.microphone) }
    if video && camera == .notDetermined { devices.append(.camera) }
    return devices
  }

  /// Whether a call may be placed with this access, once everything that could be asked was
  /// asked. Without the microphone the other side would hear silence, so the call is refused;
  /// without the camera a video call still goes ahead (it shows the other side's video, and
  /// the status says this side's camera is unavailable).
  public func refusalToPlace() -> CallPermissionError? {
    switch microphone {
    case .granted: return nil
    case .denied: return .microphoneDenied
    case .notDetermined: return .microphoneNotDetermined
    }
  }
}

/// Why the session refused to place a call: it would be silent.
public enum CallPermissionError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The user refused the microphone: the app can send them to Settings.
  case microphoneDenied
  /// The microphone was never granted and the OS could not ask now (the app is not in the
  /// foreground): ask at onboarding, `SystemCallSession.requestMediaAccess(video:)`.
  case microphoneNotDetermined

  public var description: String {
    switch self {
    case .microphoneDenied:
      return "microphone access is denied: the other side would hear nothing (Settings can allow it)"
    case .microphoneNotDetermined:
      return "microphone access was never granted and cannot be asked for now: the other side would hear nothing"
    }
  }
}
