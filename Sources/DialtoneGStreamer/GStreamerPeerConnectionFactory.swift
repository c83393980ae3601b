import DialtoneClient
import DialtoneCrypto
import Foundation

/// Makes webrtcbin peer connections with the given media. `created` reports each one (the CLI
/// follows their milestones across the fresh connections a recovery makes).
///
/// Every connection presents one ECDSA P-256 certificate made with the factory: GStreamer's
/// own is RSA, which aiortc refuses, and generating it costs the first call up to 0.6 s.
public final class GStreamerPeerConnectionFactory: PeerConnectionFactory, Sendable {
  public let media: GStreamerMedia
  public let created: AsyncStream<GStreamerPeerConnection>
  private let createdSink: AsyncStream<GStreamerPeerConnection>.Continuation
  private let certificate: SelfSignedCertificate?

  public init(media: GStreamerMedia) {
    self.media = media
    // Without a certificate webrtcbin falls back to its generated RSA one.
    certificate = try? SelfSignedCertificate.generate(commonName: "dialtone")
    (created, createdSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    await GStreamerRuntime.prepare()
    let connection = try GStreamerPeerConnection(configuration: configuration, media: media,
                                                 certificate: certificate.map { .init(pem: $0.combinedPEM, sha256Fingerprint: $0.sha256Fingerprint) })
    createdSink.yield(connection)
    return connection
  }
}
