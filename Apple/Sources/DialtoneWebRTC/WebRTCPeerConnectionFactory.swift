import DialtoneClient
import DialtoneProtocol
import Foundation
@preconcurrency import WebRTC

/// Makes `WebRTCPeerConnection`s from one shared `RTCPeerConnectionFactory` (which owns
/// WebRTC's threads, the audio device module and the codec factories: create it once).
///
/// The device has one camera, so the factory owns one `RTCVideoSource`, made on first use,
/// that every video connection it makes sends from. The camera (`CameraCapture`) feeds that
/// source, so when the engine replaces a connection the new one sends the running camera.
public final class WebRTCPeerConnectionFactory: PeerConnectionFactory, @unchecked Sendable {
  // @unchecked: RTCPeerConnectionFactory and RTCVideoSource are not Sendable-annotated; the
  // factory is immutable here and thread-safe in libwebrtc, and `sharedVideoSource` is only
  // touched under `lock`.

  /// The process-wide factory. Creating it also initialises WebRTC's SSL once.
  public static let shared = WebRTCPeerConnectionFactory()

  public let rtcFactory: RTCPeerConnectionFactory
  /// Every connection this factory makes, as it is made (the UI takes the remote video tracks
  /// from here; CallEngine owns the connection itself).
  public let created: AsyncStream<WebRTCPeerConnection>
  private let createdSink: AsyncStream<WebRTCPeerConnection>.Continuation
  private let lock = NSLock()
  private var sharedVideoSource: RTCVideoSource?

  public init() {
    _ = Self.sslInitialized
    rtcFactory = RTCPeerConnectionFactory(
      encoderFactory: RTCDefaultVideoEncoderFactory(), decoderFactory: RTCDefaultVideoDecoderFactory())
    (created, createdSink) = AsyncStream<WebRTCPeerConnection>.makeStream(bufferingPolicy: .bufferingNewest(1))
  }

  private static let sslInitialized: Bool = RTCInitializeSSL()

  /// The camera's source, shared by every video connection (and the local preview track).
  public var videoSource: RTCVideoSource {
    lock.withLock {
      if let source = sharedVideoSource { return source }
      let source = rtcFactory.videoSource()
      sharedVideoSource = source
      return source
    }
  }

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    let connection = try WebRTCPeerConnection(
      factory: rtcFactory, videoSource: configuration.video ? videoSource : nil, configuration: configuration)
    createdSink.yield(connection)
    return connection
  }
}
