import DialtoneClient
import DialtoneProtocol
import Foundation
@preconcurrency import WebRTC

/// Makes `WebRTCPeerConnection`s from one shared `RTCPeerConnectionFactory` (which owns
/// WebRTC's threads, the audio device module and the codec factories: create it once).
public final class WebRTCPeerConnectionFactory: PeerConnectionFactory, @unchecked Sendable {
  /// The process-wide factory. Creating it also initialises WebRTC's SSL once.
  public static let shared = WebRTCPeerConnectionFactory()

  public let rtcFactory: RTCPeerConnectionFactory
  /// Every connection this factory makes, as it is made (the UI takes its video tracks from
  /// here; CallEngine owns the connection itself).
  public let created: AsyncStream<WebRTCPeerConnection>
  private let createdSink: AsyncStream<WebRTCPeerConnection>.Continuation

  public init() {
    _ = Self.sslInitialized
    rtcFactory = RTCPeerConnectionFactory(
      encoderFactory: RTCDefaultVideoEncoderFactory(), decoderFactory: RTCDefaultVideoDecoderFactory())
    (created, createdSink) = AsyncStream<WebRTCPeerConnection>.makeStream(bufferingPolicy: .bufferingNewest(1))
  }

  private static let sslInitialized: Bool = RTCInitializeSSL()

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    let connection = try WebRTCPeerConnection(factory: rtcFactory, configuration: configuration)
    createdSink.yield(connection)
    return connection
  }
}
