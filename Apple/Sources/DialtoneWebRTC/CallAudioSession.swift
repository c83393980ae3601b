#if os(iOS)
import AVFoundation
@preconcurrency import WebRTC

/// WebRTC's audio under CallKit's control (rule 5: audio starts only in `didActivate`).
///
/// `RTCAudioSession` runs in manual-audio mode: WebRTC never activates the `AVAudioSession`
/// itself, and its audio unit starts only when `isAudioEnabled` becomes true. That flag is
/// set **only** from `didActivate` / `didDeactivate`, which the CXProviderDelegate calls
/// from `provider(_:didActivate:)` / `provider(_:didDeactivate:)`.
public final class CallAudioSession: @unchecked Sendable {
  public static let shared = CallAudioSession()

  private let rtc = RTCAudioSession.sharedInstance()

  private init() {}

  /// Call once at launch, before any call: manual audio, audio off, and the category CallKit
  /// will activate (`.playAndRecord` + `.voiceChat`). Never activates the session itself.
  public func configure() {
    rtc.useManualAudio = true
    rtc.isAudioEnabled = false
    let config = RTCAudioSessionConfiguration.webRTC()
    config.category = AVAudioSession.Category.playAndRecord.rawValue
    config.categoryOptions = [.allowBluetooth, .allowBluetoothA2DP]
    config.mode = AVAudioSession.Mode.voiceChat.rawValue
    RTCAudioSessionConfiguration.setWebRTC(config)
  }

  /// Before reporting or starting a call: apply the category and mode (`.videoChat` for video
  /// calls, which also routes to the speaker) without activating the session.
  public func prepare(video: Bool) {
    rtc.lockForConfiguration()
    defer { rtc.unlockForConfiguration() }
    do {
      try rtc.setCategory(.playAndRecord, with: [.allowBluetooth, .allowBluetoothA2DP])
      try rtc.setMode(video ? .videoChat : .voiceChat)
    } catch {
      // Not fatal: CallKit activates the session with its own defaults.
    }
  }

  /// `provider(_:didActivate:)`: hand the session to WebRTC and start audio I/O.
  public func didActivate(_ session: AVAudioSession) {
    rtc.audioSessionDidActivate(session)
    rtc.isAudioEnabled = true
  }

  /// `provider(_:didDeactivate:)`: stop audio I/O.
  public func didDeactivate(_ session: AVAudioSession) {
    rtc.isAudioEnabled = false
    rtc.audioSessionDidDeactivate(session)
  }
}
#endif
