import DialtoneClient
import DialtoneCrypto
import DialtoneSupport
import Foundation

/// Makes webrtcbin peer connections with the given media. `created` reports each one (the CLI
/// follows their milestones across the fresh connections a recovery makes).
///
/// Building a pipeline is kept off the dial path: the factory always holds one spare connection,
/// built and running, and hands it out (adding the call's ICE servers) when a call needs one.
/// Every connection presents an ECDSA P-256 certificate of its own, made as it is built:
/// GStreamer's own is RSA, which aiortc refuses, and generating it costs the first call up to
/// 0.6 s. A fresh connection that takes over a call (an ICE restart, a video change) thus has a
/// new DTLS fingerprint, which is how the peer (a browser) knows to run DTLS again.
public final class GStreamerPeerConnectionFactory: PeerConnectionFactory, Sendable {
  public let media: GStreamerMedia
  public let created: AsyncStream<GStreamerPeerConnection>
  private let createdSink: AsyncStream<GStreamerPeerConnection>.Continuation
  private struct Spare: Sendable {
    var spare: Task<GStreamerPeerConnection?, Never>?
    var closed = false
    /// 1:1 connections that received video so far (each records it to a file of its own).
    var recordings = 0
  }
  private let state = Locked(Spare())

  public init(media: GStreamerMedia) {
    self.media = media
    (created, createdSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    state.withLock { $0.spare = buildSpare() }
  }

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    if configuration.multistream {
      // A group call's single subscriber connection: receive-only, every section from the
      // SFU's offers (nothing reserved), each section's media to its participant.
      await GStreamerRuntime.prepare()
      let connection = try await Self.build(
        video: false, media: media.receivingSections(),
        sections: GStreamerSections(participantAudio: media.participantAudio))
      connection.configure(configuration)
      createdSink.yield(connection)
      return connection
    }
    if let participant = configuration.remoteParticipant {
      // A group call's receive-only stream: its own media settings, so no spare fits.
      await GStreamerRuntime.prepare()
      let connection = try await Self.build(
        video: configuration.video, media: media.receiving(from: participant))
      connection.configure(configuration)
      createdSink.yield(connection)
      return connection
    }
    // The spare has a video section (every 1:1 call's connection does: an audio call may be
    // upgraded); a group call's audio-only connection is built without one.
    let video = Self.hasVideoSection(configuration, camera: media.video != nil)
    // A group call's publisher sends to the SFU, which forwards VP8 only (JanusSFU); the spare
    // has this device's codec.
    var media = self.media
    if configuration.sendOnly { media.videoCodec = .vp8 }
    let ready: Task<GStreamerPeerConnection?, Never>? =
      !video || media.videoCodec != self.media.videoCodec
      ? nil
      : state.withLock { state in
        defer { state.spare = state.closed ? nil : buildSpare() }
        return state.spare
      }
    let connection: GStreamerPeerConnection
    if let warm = await ready?.value {
      connection = warm
    } else {
      await GStreamerRuntime.prepare()
      connection = try await Self.build(video: video, media: media)
    }
    connection.configure(configuration, recording: media.recordVideo.map(recordingNamer))
    createdSink.yield(connection)
    return connection
  }

  /// Names the next recording of `path` when a connection starts one.
  private func recordingNamer(_ path: String) -> @Sendable () -> String {
    let state = self.state
    return {
      let index = state.withLock { state -> Int in
        state.recordings += 1
        return state.recordings
      }
      return Self.recording(path, index: index)
    }
  }

  /// The file of the n-th connection to receive video: `path` itself, then `name-2.webm`,
  /// `name-3.webm`, ... (the extension is the one given, whatever the container); an ICE
  /// restart or a video change moves the call to a fresh connection.
  static func recording(_ path: String, index: Int) -> String {
    guard index > 1 else { return path }
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension.isEmpty ? "webm" : url.pathExtension
    return url.deletingPathExtension().path + "-\(index)." + ext
  }

  /// Whether a connection for `configuration` gets a video section: one that only sends (a
  /// group call's publisher) only with a camera to send from.
  static func hasVideoSection(_ configuration: PeerConnectionConfiguration, camera: Bool) -> Bool {
    configuration.video && (camera || !configuration.sendOnly)
  }

  /// Closes the spare connection; later requests build theirs on demand.
  public func shutdown() async {
    let task: Task<GStreamerPeerConnection?, Never>? = state.withLock { state in
      state.closed = true
      defer { state.spare = nil }
      return state.spare
    }
    await task?.value?.close()
  }

  /// Builds a pipeline on a thread of its own: building one blocks for tens of milliseconds
  /// (more under load), and a device joining a group call builds several at once; on Swift's
  /// cooperative threads that would stall every other task of the process meanwhile.
  static func build(video: Bool, media: GStreamerMedia, sections: GStreamerSections? = nil) async throws
    -> GStreamerPeerConnection
  {
    try await withCheckedThrowingContinuation { continuation in
      DispatchQueue.global(qos: .userInitiated).async {
        continuation.resume(
          with: Result {
            try GStreamerPeerConnection(
              video: video, media: media, certificate: Self.makeCertificate(), sections: sections)
          })
      }
    }
  }

  private func buildSpare() -> Task<GStreamerPeerConnection?, Never> {
    let media = self.media
    return Task.detached(priority: .userInitiated) {
      await GStreamerRuntime.prepare()
      return try? await GStreamerPeerConnectionFactory.build(video: true, media: media)
    }
  }

  /// Without a certificate webrtcbin falls back to its generated RSA one.
  private static func makeCertificate() -> GStreamerPeerConnection.Certificate? {
    (try? SelfSignedCertificate.generate(commonName: "dialtone")).map {
      .init(pem: $0.combinedPEM, sha256Fingerprint: $0.sha256Fingerprint)
    }
  }
}
