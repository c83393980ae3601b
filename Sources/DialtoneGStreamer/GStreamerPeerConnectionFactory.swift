import DialtoneClient
import DialtoneCrypto
import DialtoneSupport
import Foundation

/// Makes webrtcbin peer connections with the given media. `created` reports each one (the CLI
/// follows their milestones across the fresh connections a recovery makes).
///
/// Building a pipeline is kept off the dial path: the factory always holds one spare connection,
/// built and running, and hands it out (adding the call's ICE servers) when a call needs one.
/// A group call's publisher and single subscriber connection have shapes of their own (no video
/// section without a camera; receive-only sections): those are built when the group call asks
/// (`prepare`, as it rings or is created or joined), one of each, and not replaced when handed
/// out (a new group call prepares again), so their pipelines are ready when `group-media` and
/// the SFU's first offer come instead of being built on the way to the first audio.
/// Every connection presents an ECDSA P-256 certificate of its own, made as it is built:
/// GStreamer's own is RSA, which aiortc refuses, and generating it costs the first call up to
/// 0.6 s. A fresh connection that takes over a call (an ICE restart, a video change) thus has a
/// new DTLS fingerprint, which is how the peer (a browser) knows to run DTLS again.
public final class GStreamerPeerConnectionFactory: PeerConnectionFactory, Sendable {
  public let media: GStreamerMedia
  public let created: AsyncStream<GStreamerPeerConnection>
  private let createdSink: AsyncStream<GStreamerPeerConnection>.Continuation
  /// The connections a spare can stand in for.
  enum Shape: Hashable, Sendable {
    /// A 1:1 call's (with a video section: an audio call may be upgraded).
    case call
    /// A group call's publisher; `video`: with a video section (a camera to send).
    case publisher(video: Bool)
    /// A group call's single subscriber connection.
    case subscriber
  }
  private struct Spare: Sendable {
    var spares: [Shape: Task<GStreamerPeerConnection?, Never>] = [:]
    var closed = false
    /// 1:1 connections that received video so far (each records it to a file of its own).
    var recordings = 0
  }
  private let state = Locked(Spare())

  public init(media: GStreamerMedia) {
    self.media = media
    (created, createdSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    state.withLock { $0.spares[.call] = buildSpare(.call) }
  }

  /// Builds a spare for each group connection shape among `configurations` that has none (a
  /// receive-only stream of one participant has media of its own: never prepared).
  public func prepare(_ configurations: [PeerConnectionConfiguration]) {
    let shapes = configurations.compactMap { configuration -> Shape? in
      let shape = shape(of: configuration)
      return shape == .call ? nil : shape
    }
    state.withLock { state in
      guard !state.closed else { return }
      for shape in shapes where state.spares[shape] == nil { state.spares[shape] = buildSpare(shape) }
    }
  }

  /// The shapes that have a spare now, built or being built.
  var spareShapes: Set<Shape> { state.withLock { Set($0.spares.keys) } }

  /// The spare `configuration` can take, nil for none (a participant's own receive stream; a
  /// 1:1 call whose codec is not the device's).
  func shape(of configuration: PeerConnectionConfiguration) -> Shape? {
    if configuration.multistream { return .subscriber }
    if configuration.remoteParticipant != nil { return nil }
    let video = Self.hasVideoSection(configuration, camera: media.video != nil)
    if configuration.sendOnly { return .publisher(video: video) }
    return video ? .call : nil
  }

  /// The media of a connection of `shape`.
  private func media(of shape: Shape) -> GStreamerMedia {
    switch shape {
    case .call: return media
    case .publisher:
      // A group call's publisher sends to the SFU, which forwards VP8 only (JanusSFU).
      var media = self.media
      media.videoCodec = .vp8
      return media
    case .subscriber: return media.receivingSections()
    }
  }

  /// Takes the spare of `shape`, if there is one; a 1:1 call's is replaced at once.
  private func takeSpare(_ shape: Shape) -> Task<GStreamerPeerConnection?, Never>? {
    state.withLock { state in
      defer {
        if shape == .call, !state.closed { state.spares[.call] = buildSpare(.call) }
      }
      return state.spares.removeValue(forKey: shape)
    }
  }

  public func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection {
    if configuration.multistream {
      // A group call's single subscriber connection: receive-only, every section from the
      // SFU's offers (nothing reserved), each section's media to its participant.
      let connection: GStreamerPeerConnection
      if let warm = await takeSpare(.subscriber)?.value {
        connection = warm
      } else {
        await GStreamerRuntime.prepare()
        connection = try await Self.build(shape: .subscriber, media: media(of: .subscriber))
      }
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
    // The 1:1 spare has a video section (every 1:1 call's connection does: an audio call may be
    // upgraded); a group call's audio-only publisher is built without one, from its own spare.
    let video = Self.hasVideoSection(configuration, camera: media.video != nil)
    let shape = shape(of: configuration)
    let media = shape.map { self.media(of: $0) } ?? self.media
    let connection: GStreamerPeerConnection
    if let shape, let warm = await takeSpare(shape)?.value {
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
    let tasks = state.withLock { state in
      state.closed = true
      defer { state.spares = [:] }
      return Array(state.spares.values)
    }
    for task in tasks { await task.value?.close() }
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

  private func buildSpare(_ shape: Shape) -> Task<GStreamerPeerConnection?, Never> {
    let media = media(of: shape)
    return Task.detached(priority: .userInitiated) {
      await GStreamerRuntime.prepare()
      return try? await GStreamerPeerConnectionFactory.build(shape: shape, media: media)
    }
  }

  /// A connection of `shape` with `media` (that shape's, `media(of:)`).
  static func build(shape: Shape, media: GStreamerMedia) async throws -> GStreamerPeerConnection {
    switch shape {
    case .call: return try await build(video: true, media: media)
    case .publisher(let video): return try await build(video: video, media: media)
    case .subscriber:
      return try await build(
        video: false, media: media, sections: GStreamerSections(participantAudio: media.participantAudio))
    }
  }

  /// Without a certificate webrtcbin falls back to its generated RSA one.
  private static func makeCertificate() -> GStreamerPeerConnection.Certificate? {
    (try? SelfSignedCertificate.generate(commonName: "dialtone")).map {
      .init(pem: $0.combinedPEM, sha256Fingerprint: $0.sha256Fingerprint)
    }
  }
}
