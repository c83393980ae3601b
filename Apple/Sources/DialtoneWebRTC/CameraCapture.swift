#if os(iOS)
import AVFoundation
@preconcurrency import WebRTC

/// Feeds the front camera into a `WebRTCPeerConnection.videoSource`.
public final class CameraCapture: @unchecked Sendable {
  private let capturer: RTCCameraVideoCapturer

  public init(source: RTCVideoSource) {
    capturer = RTCCameraVideoCapturer(delegate: source)
  }

  /// Starts the front camera at about 640×480, 30 fps (or the nearest the device offers).
  public func start(position: AVCaptureDevice.Position = .front) async {
    let devices = RTCCameraVideoCapturer.captureDevices()
    guard let device = devices.first(where: { $0.position == position }) ?? devices.first else { return }
    let formats = RTCCameraVideoCapturer.supportedFormats(for: device)
    let target = 640 * 480
    let format = formats.min { a, b in
      let da = CMVideoFormatDescriptionGetDimensions(a.formatDescription)
      let db = CMVideoFormatDescriptionGetDimensions(b.formatDescription)
      return abs(Int(da.width) * Int(da.height) - target) < abs(Int(db.width) * Int(db.height) - target)
    }
    guard let format else { return }
    let maxFps = format.videoSupportedFrameRateRanges.map(\.maxFrameRate).max() ?? 30
    let fps = Int(min(maxFps, 30))
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      capturer.startCapture(with: device, format: format, fps: fps) { _ in continuation.resume() }
    }
  }

  public func stop() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      capturer.stopCapture { continuation.resume() }
    }
  }
}
#endif
