#if os(iOS)
  import AVFoundation
  import DialtoneClient

  /// `MediaPermissions` over iOS: the microphone's record permission (`AVAudioApplication`,
  /// iOS 17) and the camera's authorization (`AVCaptureDevice`). Give it to `SystemCallSession`
  /// (`permissions:`), and call `session.requestMediaAccess(video:)` at onboarding, in the
  /// foreground: a call answered on the lock screen cannot show the prompt (docs/ios.md).
  /// The Info.plist needs `NSMicrophoneUsageDescription` and `NSCameraUsageDescription`.
  public struct SystemMediaPermissions: MediaPermissions {
    public init() {}

    public func authorization(for device: MediaDevice) -> MediaAuthorization {
      switch device {
      case .microphone:
        switch AVAudioApplication.shared.recordPermission {
        case .granted: return .granted
        case .denied: return .denied
        case .undetermined: return .notDetermined
        @unknown default: return .denied
        }
      case .camera:
        switch AVCaptureDevice.authorizationStatus(for: .video) {
        case .authorized: return .granted
        case .notDetermined: return .notDetermined
        case .denied, .restricted: return .denied
        @unknown default: return .denied
        }
      }
    }

    public func requestAccess(to device: MediaDevice) async -> MediaAuthorization {
      guard authorization(for: device) == .notDetermined else { return authorization(for: device) }
      switch device {
      case .microphone:
        // The answer is the user's, or none when the prompt cannot be shown (not in the
        // foreground): the state then stays undetermined.
        _ = await AVAudioApplication.requestRecordPermission()
      case .camera:
        _ = await AVCaptureDevice.requestAccess(for: .video)
      }
      return authorization(for: device)
    }
  }
#endif
