import DialtoneClient
import Foundation

/// Makes webrtcbin peer connections with the given media. `created` reports each one (the CLI
/// follows their milestones across the fresh connections a recovery makes).
public final class GStreamerPeerConnectionFactory: PeerConnectionFactory, Sendable {
  public let media: GStreamerMedia
  public let created: AsyncStream<GStreamerPeerConnection>
  private let createdSink: AsyncStream<GStreamerPeerConnection>.Continuation

  public init(media: GStreamerMedia) {
    self.media = media
    (created, createdSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    await GStreamerRuntime.prepare()
    let connection = try GStreamerPeerConnection(configuration: configuration, media: media)
    createdSink.yield(connection)
    return connection
  }
}
