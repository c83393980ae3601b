#if os(iOS)
  import AVFoundation
  import CoreMedia
  @preconcurrency import WebRTC

  /// Feeds a camera into an `RTCVideoSource` (`WebRTCPeerConnectionFactory.videoSource`, shared
  /// by every video connection).
  ///
  /// `start` and `stop` return at once; `RTCCameraVideoCapturer` runs them on its own serial
  /// capture queue, in call order, so a stop right after a start leaves the camera off.
  public final class CameraCapture: @unchecked Sendable {
    // @unchecked: RTCCameraVideoCapturer is not Sendable-annotated; it is immutable here and
    // runs start and stop on its own capture queue.
    private let capturer: RTCCameraVideoCapturer

    public init(source: RTCVideoSource) {
      capturer = RTCCameraVideoCapturer(delegate: source)
    }

    /// Starts the front camera (or `position`) at about 640×480 and at most 30 fps, or the
    /// nearest the device offers. Without camera permission the capture session delivers no
    /// frames (the Info.plist needs `NSCameraUsageDescription`).
    public func start(position: AVCaptureDevice.Position = .front) {
      let devices = RTCCameraVideoCapturer.captureDevices()
      guard let device = devices.first(where: { $0.position == position }) ?? devices.first else { return }
      let target = 640 * 480
      let format = RTCCameraVideoCapturer.supportedFormats(for: device).min { a, b in
        let da = CMVideoFormatDescriptionGetDimensions(a.formatDescription)
        let db = CMVideoFormatDescriptionGetDimensions(b.formatDescription)
        return abs(Int(da.width) * Int(da.height) - target) < abs(Int(db.width) * Int(db.height) - target)
      }
      guard let format else { return }
      let maxFps = format.videoSupportedFrameRateRanges.map(\.maxFrameRate).max() ?? 30
      capturer.startCapture(with: device, format: format, fps: Int(min(maxFps, 30)))
    }

    public func stop() {
      capturer.stopCapture()
    }
  }
#endif
