#if os(iOS)
  import AVFoundation
  import DialtoneClient
  import Foundation
  @preconcurrency import WebRTC

  /// `CallMediaControl` over WebRTC: `RTCAudioSession` in manual-audio mode, under CallKit's
  /// control, and the camera feeding the factory's shared video source. `SystemCallSession`
  /// calls it, in the order its coordinator decides; nothing else switches audio or the camera.
  ///
  /// - Manual audio: WebRTC never activates the `AVAudioSession` itself, and its audio unit
  ///   starts only once `isAudioEnabled` is true, which happens only when CallKit has activated
  ///   the session (`provider(_:didActivate:)` → session → `audioSessionActivated()`).
  /// - When its audio unit starts, WebRTC applies its *global* `RTCAudioSessionConfiguration`
  ///   (category, mode, options) to the session. `prepareAudio(video:)` therefore sets that
  ///   global configuration for every call (`.videoChat` with the speaker for video,
  ///   `.voiceChat` otherwise), or a video call would fall back to `.voiceChat` on the earpiece.
  public final class WebRTCCallMedia: CallMediaControl, @unchecked Sendable {
    // @unchecked: RTCAudioSession is not Sendable-annotated; it is WebRTC's process-wide
    // singleton and locks internally. `camera` is only touched under `lock`.
    private let rtc = RTCAudioSession.sharedInstance()
    private let factory: WebRTCPeerConnectionFactory
    private let lock = NSLock()
    private var camera: CameraCapture?

    public init(factory: WebRTCPeerConnectionFactory = .shared) {
      self.factory = factory
    }

    /// Call once at launch, before any call: manual audio, audio off, and the voice-call
    /// configuration. Never activates the session itself.
    public func configure() {
      rtc.useManualAudio = true
      rtc.isAudioEnabled = false
      RTCAudioSessionConfiguration.setWebRTC(Self.configuration(video: false))
    }

    // MARK: CallMediaControl

    /// Before CallKit activates audio for a call: WebRTC's global configuration for this call,
    /// and the same category and mode applied now (locked, not activated).
    public func prepareAudio(video: Bool) {
      let config = Self.configuration(video: video)
      RTCAudioSessionConfiguration.setWebRTC(config)
      rtc.lockForConfiguration()
      defer { rtc.unlockForConfiguration() }
      do {
        // The configuration keeps strings (its properties are `NSString`); the setters take
        // AVAudioSession's typed names (since WebRTC M118).
        try rtc.setCategory(AVAudioSession.Category(rawValue: config.category), with: config.categoryOptions)
        try rtc.setMode(AVAudioSession.Mode(rawValue: config.mode))
      } catch {
        // Not fatal: WebRTC applies the global configuration again when its audio unit starts.
      }
    }

    /// `provider(_:didActivate:)`: hand the active session to WebRTC and start audio I/O.
    public func audioSessionActivated() {
      rtc.audioSessionDidActivate(AVAudioSession.sharedInstance())
      rtc.isAudioEnabled = true
    }

    /// `provider(_:didDeactivate:)`, or a provider reset: stop audio I/O.
    public func audioSessionDeactivated() {
      rtc.isAudioEnabled = false
      rtc.audioSessionDidDeactivate(AVAudioSession.sharedInstance())
    }

    public func startCamera() {
      let capture = lock.withLock {
        if let camera { return camera }
        let made = CameraCapture(source: factory.videoSource)
        camera = made
        return made
      }
      capture.start()
    }

    public func stopCamera() {
      lock.withLock { camera }?.stop()
    }

    // MARK: Configuration

    /// A fresh configuration (never the shared instance `webRTC()` returns, which WebRTC reads
    /// on its own threads) with WebRTC's sample rate, buffer and channels, and the call's
    /// category, options and mode.
    static func configuration(video: Bool) -> RTCAudioSessionConfiguration {
      let current = RTCAudioSessionConfiguration.webRTC()
      let config = RTCAudioSessionConfiguration()
      config.sampleRate = current.sampleRate
      config.ioBufferDuration = current.ioBufferDuration
      config.inputNumberOfChannels = current.inputNumberOfChannels
      config.outputNumberOfChannels = current.outputNumberOfChannels
      config.category = AVAudioSession.Category.playAndRecord.rawValue
      // `.allowBluetooth` is named `.allowBluetoothHFP` from the iOS 26 SDK on (same value).
      var options: AVAudioSession.CategoryOptions = [.allowBluetooth, .allowBluetoothA2DP]
      if video { options.insert(.defaultToSpeaker) }
      config.categoryOptions = options
      config.mode = (video ? AVAudioSession.Mode.videoChat : AVAudioSession.Mode.voiceChat).rawValue
      return config
    }
  }
#endif
