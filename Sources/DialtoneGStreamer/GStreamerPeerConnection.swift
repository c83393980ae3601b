internal import CGStreamer
import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A `PeerConnection` over GStreamer's webrtcbin: Opus audio both ways, a data channel,
/// trickle ICE, STUN/TURN, relay-only policy and stats.
///
/// webrtcbin 1.22 ignores ICE restarts, so `canRestartIce` is false and `CallEngine` recovers
/// a lost connection on a fresh one. Every GStreamer callback arrives on a GStreamer thread;
/// state is guarded by `lock`, and the callbacks hold a reference to this object until
/// `close()` has stopped the pipeline.
public final class GStreamerPeerConnection: PeerConnection, @unchecked Sendable {
  // @unchecked: mutable state is only touched under `lock`; the GStreamer objects are thread-safe.

  /// Progress of the connection, for the CLI's timings.
  public enum Milestone: String, Sendable, Equatable {
    case iceConnected = "ice-connected"
    case dtlsConnected = "dtls-connected"
    case dataChannelOpen = "data-channel-open"
    case firstAudio = "first-audio"
    case firstVideoFrame = "first-video-frame"
  }

  /// What arrived of the remote video so far.
  public struct ReceivedVideo: Sendable, Equatable {
    public var frames = 0
    public var width = 0
    public var height = 0
    /// Frames decoded in the last second (W3C `framesPerSecond`).
    public var framesPerSecond = 0.0
    /// The mean colour of the latest frame, 0...255 per channel.
    public var red = 0
    public var green = 0
    public var blue = 0

    public init() {}

    /// Several streams' video as one: every frame counted, the size and colour of the latest
    /// stream that decoded any.
    public static func merged(_ parts: [ReceivedVideo]) -> ReceivedVideo {
      var result = parts.last(where: { $0.frames > 0 }) ?? ReceivedVideo()
      result.frames = parts.reduce(0) { $0 + $1.frames }
      return result
    }
  }

  public let canRestartIce = false
  public let localCandidates: AsyncStream<IceCandidate?>
  public let connectionStates: AsyncStream<PeerConnectionState>
  public let dataChannelMessages: AsyncStream<Data>
  public let milestones: AsyncStream<Milestone>
  /// Every remote candidate given to the connection, as it is given (what the other side
  /// revealed of its addresses: the CLI reports them). The newest 64 are kept for a slow reader.
  public let remoteCandidates: AsyncStream<IceCandidate>

  /// When a milestone was reached (its report may be read later, from a busy process).
  public func reachedAt(_ milestone: Milestone) -> ContinuousClock.Instant? {
    lock.withLock { reached[milestone] }
  }

  private let candidateSink: AsyncStream<IceCandidate?>.Continuation
  private let stateSink: AsyncStream<PeerConnectionState>.Continuation
  private let dataSink: AsyncStream<Data>.Continuation
  private let milestoneSink: AsyncStream<Milestone>.Continuation
  private let remoteCandidateSink: AsyncStream<IceCandidate>.Continuation
  private let media: GStreamerMedia
  private let certificate: Certificate?
  /// A group call's single subscriber connection: who each section carries.
  let sections: GStreamerSections?

  private let pipeline: UnsafeMutablePointer<GstElement>
  private let webrtc: UnsafeMutablePointer<GstElement>
  private let mic: UnsafeMutablePointer<GstElement>?
  /// A camera branch was built (its valve exists): this connection can send video.
  private let hasCamera: Bool
  private let lock = Locked<Void>()
  private var callbacks: UnsafeMutablePointer<dt_webrtc_callbacks>?
  private var channel: OpaquePointer?
  private var channelCallbacks: UnsafeMutablePointer<dt_channel_callbacks>?
  private var channelOpen = false
  private var closed = false
  private var reached: [Milestone: ContinuousClock.Instant] = [:]
  private var gatheringComplete = false
  private var opusPayloadType = GStreamerMedia.defaultOpusPayloadType
  /// What the camera branch encodes now, at which payload type (an offer can change both).
  private var sendingCodec: VideoCodec
  private var videoPayloadType: Int
  private var videoTransportWideCCID: Int? = VideoCodec.defaultTransportWideCCID
  /// The SSRC of the audio this connection sends (fixed: see `GStreamerMedia.pipelineDescription`).
  private let audioSSRC = UInt32.random(in: 1...UInt32.max)
  private let videoSSRC = UInt32.random(in: 1...UInt32.max)
  private var receivedVideo = ReceivedVideo()
  private var freezeCounter = FreezeCounter()
  private var frameRate = FrameRateMeter()
  private let startedAt = ContinuousClock.now
  /// The SSRCs the peer's latest description announced for its video (stats tell them apart).
  private var remoteVideoSSRCs: [UInt32] = []
  /// The codec the peer's latest description settles on (`VideoCodec.choice`: for an answer,
  /// the one it carries; for an offer, the one this side answers with).
  private var remoteVideoCodec: VideoCodec?
  private var cameraSending = false
  /// The call wants the camera on (it sends only while media is not held as well).
  private var cameraWanted = false
  /// A pre-connected leg before its call was accepted on it: nothing is sent (9b).
  private var mediaHeld = false
  private var recordingName: (@Sendable () -> String)?
  private var keyframeSent = false
  private var rateController = VideoRateController(start: GStreamerMedia.startVideoBitrate)
  private var resolutionLadder: VideoResolutionLadder?
  private var targetBitrate = GStreamerMedia.startVideoBitrate
  private var rateControl: Task<Void, Never>?
  private var playing = false
  private var wantsDataChannel = false
  /// A group call's receive-only stream of one participant: its answer makes this side the DTLS
  /// server (`GStreamerSections.passive`), as the single subscriber connection's does.
  private var answersAsDTLSServer = false
  /// Media liveness. libnice in webrtcbin 1.22 runs without consent freshness, so a dead path
  /// (Wi-Fi gone) never turns ICE "disconnected". Remote audio is the signal instead: none for
  /// `stallAfter` while connected reports `.disconnected` (the engine's restart policy takes it
  /// from there), and audio coming back reports `.connected`.
  private var lastAudioAt: ContinuousClock.Instant?
  private var transportConnected = false
  private var stalled = false
  private var watchdog: Task<Void, Never>?
  static let stallAfter: Duration = .seconds(2)
  /// The `a=mid` of each m-section, by index, of the local and remote descriptions: webrtcbin
  /// speaks m-line indexes, peers like aiortc match candidates by mid.
  private var localMids: [String?] = []
  private var remoteMids: [String?] = []
  /// The reference the GStreamer callbacks hold (released after the pipeline stopped).
  private var retainedByCallbacks: Unmanaged<GStreamerPeerConnection>?
  /// What this connection negotiates: the media's profile, without RED on a group call's
  /// streams (an SFU forwards each publisher's packets to subscribers that may not take RED).
  private var audioProfile: AudioProfile
  /// How the encoder was set from the other side's description.
  private var audioSending: AudioSendParameters?
  /// RED is negotiated and this side sends it (each packet repeats an earlier frame).
  private var redundancyNegotiated = false
  /// Whether the answer negotiated RED (nil before an answer).
  private var redundancyWanted: Bool?
  /// The remote audio's jitter buffer (referenced; released at teardown) and its adaptive
  /// latency (`JitterBufferTarget`).
  private var audioJitterBuffer: UnsafeMutablePointer<GstElement>?
  private var jitterTarget = JitterBufferTarget()
  /// The network's loss on the received audio, before RED or FEC repaired any.
  private var receiveLoss = AudioReceiveLoss()
  /// The loss the encoder is told, from the other side's receiver reports.
  private var lossEstimate = AudioLossEstimate()
  private var audioControl: Task<Void, Never>?
  /// ICE-TCP candidates held while UDP may connect (`IceTCPFallback`), and its timer.
  private var tcpFallback = IceTCPFallback()
  private var tcpFallbackTimer: Task<Void, Never>?
  /// The figures read so far (`trackedStats`).
  private var lastStats: dt_stats?

  /// The DTLS identity every connection of a factory presents.
  struct Certificate: Sendable {
    let pem: String
    let sha256Fingerprint: String
  }

  /// Builds and starts the pipeline; `configure` must follow before the first offer or
  /// remote description (the factory builds connections ahead of calls, before it knows them).
  init(video: Bool, media: GStreamerMedia, certificate: Certificate?, sections: GStreamerSections? = nil) throws {
    GStreamerRuntime.ensureInitialised()
    self.media = media
    self.certificate = certificate
    self.sections = sections
    audioProfile = media.audioProfile
    jitterTarget = JitterBufferTarget(fixedMs: media.fixedJitterBufferMs)
    sendingCodec = media.videoCodec
    videoPayloadType = media.videoCodec.defaultPayloadType
    resolutionLadder = media.video.map {
      VideoResolutionLadder(
        width: $0.width, height: $0.height, framerate: $0.framerate, start: GStreamerMedia.startVideoBitrate)
    }
    (localCandidates, candidateSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (connectionStates, stateSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (dataChannelMessages, dataSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(256))
    (milestones, milestoneSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (remoteCandidates, remoteCandidateSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(64))

    var error: UnsafeMutablePointer<gchar>?
    guard
      let pipeline = dt_parse_launch(
        media.pipelineDescription(ssrc: audioSSRC, videoSSRC: videoSSRC, sendsVideo: video && media.sends), &error)
    else {
      let message = error.map { String(cString: $0) } ?? "unknown"
      g_free(error)
      throw GStreamerError.pipeline(message)
    }
    dt_ref_sink(pipeline)
    guard let webrtc = dt_bin_get(pipeline, "webrtc") else {
      dt_unref(pipeline)
      throw GStreamerError.pipeline("no webrtcbin")
    }
    self.pipeline = pipeline
    self.webrtc = webrtc
    self.mic = dt_bin_get(pipeline, "mic")
    let valve = dt_bin_get(pipeline, "camera")
    hasCamera = valve != nil
    if let valve { dt_unref(valve) }

    if case .wavFile(let path) = media.audio, let file = dt_bin_get(pipeline, "file") {
      dt_set(file, "location", path)
      dt_unref(file)
    }
    if case .file(let path)? = media.video?.content, let file = dt_bin_get(pipeline, "videofile") {
      dt_set(file, "location", path)
      dt_unref(file)
      if let clock = dt_bin_get(pipeline, "videoclock") {
        dt_drop_eos(clock)
        dt_unref(clock)
      }
    }
    if let certificate { dt_pipeline_use_certificate(pipeline, certificate.pem) }
    if media.relayOnly { dt_set(webrtc, "ice-transport-policy", "relay") }
    // A camera branch brings its own (send-receive) video transceiver; without one, reserve a
    // receive-only one before the first offer.
    if video && (media.video == nil || !media.sends) {
      dt_webrtc_reserve_video(webrtc, media.receiveCaps)
    } else if video {
      // Codec preferences, so a section that does not send (recvonly in an audio call) is
      // still offered: webrtcbin reads a sending section's codecs from its pad's caps only.
      dt_webrtc_set_codec_preferences(webrtc, 1, sendingCodec.caps(payloadType: videoPayloadType))
    }
    // Video repairs a lost packet by retransmission (a lost keyframe packet otherwise costs
    // every frame until the next keyframe).
    if video { dt_webrtc_enable_nack(webrtc, 1) }
    // A receiver report a second (webrtcbin's default: every 5 s): the audio encoder follows the
    // loss they report, the video sender's rate control the loss and round trip.
    dt_webrtc_rtcp_interval(webrtc, 1000)
    // After the codec preferences: webrtcbin answers its sink pad's caps query from them.
    if hasCamera {
      do {
        try installEncoder(sendingCodec, payloadType: videoPayloadType)
      } catch {
        dt_unref(webrtc)
        dt_unref(pipeline)
        throw error
      }
    }

    let retained = Unmanaged.passRetained(self)
    retainedByCallbacks = retained
    var table = dt_webrtc_callbacks(
      ctx: retained.toOpaque(), candidate: onCandidate, state: onState, channel: onChannel,
      audio: onAudio, error: onError, video: onVideo, record_video: onRecording, jitterbuffer: onJitterBuffer,
      arrival: onArrival, mid_audio: sections == nil ? nil : onSectionAudio,
      mid_video: sections == nil ? nil : onSectionVideo)
    callbacks = dt_webrtc_connect(pipeline, webrtc, &table)
    // PAUSED, not PLAYING: the live source sends nothing yet, so no payload type is fixed on
    // webrtcbin's sink pad before the first description (an answer must use the offerer's).
    guard dt_set_state(pipeline, GST_STATE_PAUSED) != 0 else {
      teardown()
      throw GStreamerError.pipeline("the pipeline did not start (missing plugins?)")
    }
  }

  /// The call's STUN/TURN servers (they take effect at the next gathering) and whether its
  /// first offer carries a data channel. Set before the first offer or remote description.
  /// `recording` names the file for the remote video when it first arrives (nil: none).
  func configure(_ configuration: PeerConnectionConfiguration, recording: (@Sendable () -> String)? = nil) {
    let group = configuration.remoteParticipant != nil || configuration.sendOnly || configuration.multistream
    let red = lock.withLock { () -> Bool in
      wantsDataChannel = configuration.dataChannel
      answersAsDTLSServer = configuration.remoteParticipant != nil
      mediaHeld = configuration.mediaHeld
      recordingName = recording
      if group { audioProfile.redundancy = false }
      return audioProfile.redundancy && media.sends
    }
    // Before the first description: webrtcbin then offers RED, and answers it when offered.
    if red { dt_webrtc_offer_red(webrtc, 0) }
    if configuration.mediaHeld { setAudioHeld(true) }
    // Before the first gathering: libnice (`force-relay`) then makes relay candidates only.
    if configuration.iceTransportPolicy == .relay { dt_set(webrtc, "ice-transport-policy", "relay") }
    let uris = IceServerURIs(configuration.iceServers)
    if let stun = uris.stun { dt_set(webrtc, "stun-server", stun) }
    for turn in uris.turn { _ = dt_webrtc_add_turn_server(webrtc, turn) }
  }

  // MARK: PeerConnection

  public func createOffer(iceRestart: Bool) async throws -> SessionDescription {
    // iceRestart is ignored by webrtcbin 1.22 (canRestartIce == false).
    try play()
    if lock.withLock({ wantsDataChannel }) { openDataChannelIfNeeded() }
    return withAudioRules(try await describeWithOurFingerprint("offer") { dt_webrtc_create_offer(self.webrtc, $0) })
  }

  public func createAnswer() async throws -> SessionDescription {
    try play()
    let answer = withAudioRules(
      try await describeWithOurFingerprint("answer") { dt_webrtc_create_answer(self.webrtc, $0) })
    if let sections { return sections.wire(answer: answer) }
    return lock.withLock { answersAsDTLSServer } ? GStreamerSections.passive(answer) : answer
  }

  /// Dialtone's audio rules (`AudioSDP`) on a description webrtcbin made.
  private func withAudioRules(_ description: SessionDescription) -> SessionDescription {
    SessionDescription(sdp: AudioSDP.local(description.sdp, profile: lock.withLock { audioProfile }))
  }

  /// The description with our certificate's fingerprint. webrtcbin 1.22 fingerprints a
  /// configured certificate wrongly (it hashes the key's PEM lines along with the
  /// certificate's), so the lines it writes are replaced with the right value.
  private func describeWithOurFingerprint(
    _ field: String, _ emit: @escaping (UnsafeMutablePointer<GstPromise>) -> Void
  ) async throws -> SessionDescription {
    let made = try await describe(field, emit)
    guard let certificate else { return made }
    return SessionDescription(sdp: Self.replacingFingerprints(in: made.sdp, with: certificate.sha256Fingerprint))
  }

  static func replacingFingerprints(in sdp: String, with sha256: String) -> String {
    sdp.components(separatedBy: "\r\n")
      .map { $0.hasPrefix("a=fingerprint:") ? "a=fingerprint:sha-256 \(sha256)" : $0 }
      .joined(separator: "\r\n")
  }

  public func setLocalDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws {
    try play()
    let description = kind == .answer ? sections?.local(answer: description) ?? description : description
    try await apply(description, kind: kind, local: true)
    if kind == .answer { settleRedundancy(answer: description.sdp) }
  }

  /// The encoder as the other side's description asks (`AudioSDP.sending`): bitrate, frame
  /// size, in-band FEC, DTX.
  private func configureAudioSender(toward remote: String) {
    let profile = lock.withLock { audioProfile }
    guard let parameters = AudioSDP.sending(toward: remote, profile: profile),
      let encoder = dt_bin_get(pipeline, "aenc")
    else { return }
    dt_set(encoder, "bitrate", String(parameters.bitrate))
    dt_set(encoder, "frame-size", String(parameters.packetTimeMs))
    dt_set(encoder, "inband-fec", parameters.inbandFEC ? "true" : "false")
    dt_set(encoder, "dtx", parameters.dtx ? "true" : "false")
    dt_unref(encoder)
    lock.withLock { audioSending = parameters }
  }

  /// Once the answer is applied: RED is on when both sides listed it, and webrtcbin's RED
  /// encoder then repeats the frame `redundancyDistance` packets back in each packet (it
  /// leaves them without redundancy otherwise). Off, it must send plain Opus: its payload type
  /// is only set when RED was negotiated.
  private func settleRedundancy(answer: String) {
    let profile = lock.withLock { audioProfile }
    let wanted = profile.redundancy && AudioSDP.redundancyPayloadType(in: answer) != nil
    lock.withLock { redundancyWanted = wanted }
    applyRedundancyDistance()
  }

  /// webrtcbin makes its RED encoder, and gives it the negotiated payload type, only once the
  /// stream's transport runs (after the answer is applied): tried at the answer, when the
  /// connection is up, and on each audio tick until it took.
  private func applyRedundancyDistance() {
    let (wanted, done, distance) = lock.withLock {
      (redundancyWanted, redundancyNegotiated, UInt32(max(1, audioProfile.redundancyDistance)))
    }
    // Not negotiated: the encoders stay at distance 0 and pass Opus through.
    guard wanted == true, !done else { return }
    let pt = dt_webrtc_red_distance(webrtc, distance)
    lock.withLock { redundancyNegotiated = pt > 0 }
  }

  /// Whether RED carries this connection's audio (both ways: the rules put it first on both).
  public var sendsRedundancy: Bool { lock.withLock { redundancyNegotiated } }

  private func useOpusPayloadType(_ pt: Int) {
    let current = lock.withLock { () -> Bool in
      defer { opusPayloadType = pt }
      return opusPayloadType == pt
    }
    guard !current, let pay = dt_bin_get(pipeline, "pay"), let caps = dt_bin_get(pipeline, "rtpcaps") else { return }
    dt_set(pay, "pt", String(pt))
    dt_set(caps, "caps", GStreamerMedia.rtpCaps(payloadType: pt, ssrc: audioSSRC))
    dt_webrtc_set_first_codec_preferences(webrtc, GStreamerMedia.rtpCaps(payloadType: pt))
    dt_unref(pay)
    dt_unref(caps)
  }

  /// The encoder and payloader for `codec` between the camera's valve and webrtcbin.
  private func installEncoder(_ codec: VideoCodec, payloadType: Int) throws {
    guard let video = media.video else { return }
    let bitrate = lock.withLock { targetBitrate }
    let description = codec.encoder(
      framerate: video.framerate, bitrate: bitrate, payloadType: payloadType, ssrc: videoSSRC)
    var error: UnsafeMutablePointer<gchar>?
    guard dt_install_video_encoder(pipeline, description, &error) != 0 else {
      let message = error.map { String(cString: $0) } ?? "the video encoder"
      g_free(error)
      throw GStreamerError.pipeline(message)
    }
  }

  /// Sends what an offer asks for (aiortc offers VP8 at 97, Chrome at 96, H.264 at 102+): the
  /// payload type is set on the payloader, a different codec replaces the encoder. The valve
  /// is closed meanwhile, so nothing is inside the bin being replaced.
  private func useVideoCodec(_ codec: VideoCodec, payloadType pt: Int, transportWideCCID: Int?) async throws {
    let (current, sending) = lock.withLock { () -> (Bool, Bool) in
      defer {
        sendingCodec = codec
        videoPayloadType = pt
        videoTransportWideCCID = transportWideCCID
      }
      let same = sendingCodec == codec && videoPayloadType == pt && videoTransportWideCCID == transportWideCCID
      return (same, cameraSending)
    }
    guard !current, let caps = dt_bin_get(pipeline, "vcaps") else { return }
    defer { dt_unref(caps) }
    let valve = dt_bin_get(pipeline, "camera")
    defer { if let valve { dt_unref(valve) } }
    if sending, let valve { dt_set(valve, "drop", "true") }
    // The preferences first: webrtcbin answers its sink pad's caps query from them.
    dt_webrtc_set_codec_preferences(webrtc, 1, codec.answerCaps(payloadType: pt, transportWideCCID: transportWideCCID))
    dt_set(caps, "caps", codec.answerCaps(payloadType: pt, ssrc: videoSSRC, transportWideCCID: transportWideCCID))
    try installEncoder(codec, payloadType: pt)
    if sending, let valve { dt_set(valve, "drop", "false") }
    for _ in 0..<50 {
      let negotiated = dt_webrtc_sink_payload_at(webrtc, "sink_1")
      if negotiated == -1 || negotiated == Int32(pt) { break }
      try? await Task.sleep(for: .milliseconds(5))
    }
  }

  public func setRemoteDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws {
    let description = kind == .offer ? sections?.remote(offer: description) ?? description : description
    if description.sdp.contains("a=candidate:") {
      let now = secondsSinceStartDuration()
      lock.withLock { tcpFallback.remoteDescriptionHadCandidates(at: now) }
      armTCPFallback()
    }
    // (A single subscriber connection answers every section from the offer as it is: its
    // transceivers are all the offer's, created from it.)
    if kind == .offer, sections == nil,
      let (codec, pt) = VideoCodec.choice(in: description.sdp, preferring: media.videoCodec)
    {
      let twcc = VideoCodec.transportWideCCID(in: description.sdp)
      if hasCamera {
        try await useVideoCodec(codec, payloadType: pt, transportWideCCID: twcc)
      } else {
        // A receive-only section: webrtcbin answers from the codec preferences.
        dt_webrtc_set_codec_preferences(webrtc, 1, codec.answerCaps(payloadType: pt, transportWideCCID: twcc))
      }
    }
    // The offerer's Opus payload type (aiortc's is 96) must be ours before the offer is
    // applied, or webrtcbin answers from a new receive-only transceiver instead of ours.
    if kind == .offer, sections == nil, let pt = GStreamerMedia.opusPayloadType(in: description.sdp) {
      useOpusPayloadType(pt)
      // webrtcbin matches the offer against what its sink pad already negotiated: wait (a frame
      // or two) until the new payload type got there.
      for _ in 0..<50 {
        let current = dt_webrtc_sink_payload(webrtc)
        if current == -1 || current == Int32(pt) { break }
        try? await Task.sleep(for: .milliseconds(5))
      }
    }
    // webrtcbin 1.22 aborts the process (an assertion in _connect_rtpfunnel) on an answer that
    // rejects a bundled section: refuse it instead.
    if kind == .answer, let rejected = Self.rejectedSections(in: description.sdp).first {
      throw GStreamerError.negotiation("the peer rejected the \(rejected) section")
    }
    try await apply(description, kind: kind, local: false)
    configureAudioSender(toward: description.sdp)
    if kind == .answer { settleRedundancy(answer: description.sdp) }
    try play()
  }

  /// Starts the media (once): after the first description, when the payload type is known.
  private func play() throws {
    let first = lock.withLock { () -> Bool in
      defer { playing = true }
      return !playing && !closed
    }
    guard first else { return }
    continueAudioFile()
    guard dt_set_state(pipeline, GST_STATE_PLAYING) != 0 else {
      throw GStreamerError.pipeline("the pipeline did not start")
    }
    lock.withLock {
      if hasCamera { rateControl = startRateControl() }
      audioControl = startAudioControl()
    }
  }

  /// A file source starts where the media's playing of it is (`AudioFilePlayback`): a fresh
  /// connection that takes over a call continues the file rather than starting it over.
  private func continueAudioFile() {
    guard case .wavFile = media.audio, let parser = dt_bin_get(pipeline, "wav") else { return }
    defer { dt_unref(parser) }
    let position = media.filePlayback.position(startingAt: RemoteAudio.clockNow())
    if position > 0 { _ = dt_file_source_seek(parser, guint64(position)) }
  }

  public func addRemoteCandidate(_ candidate: IceCandidate) async throws {
    let line = candidate.candidate.hasPrefix("a=") ? String(candidate.candidate.dropFirst(2)) : candidate.candidate
    guard !line.isEmpty, !isClosed else { return }  // "" = end of candidates: nothing to add
    remoteCandidateSink.yield(
      IceCandidate(candidate: line, sdpMid: candidate.sdpMid, sdpMLineIndex: candidate.sdpMLineIndex))
    let now = secondsSinceStartDuration()
    let admitted = lock.withLock { tcpFallback.remote(candidate, at: now) }
    armTCPFallback()
    if let admitted { add(admitted) }
  }

  private func add(_ candidate: IceCandidate) {
    let line = candidate.candidate.hasPrefix("a=") ? String(candidate.candidate.dropFirst(2)) : candidate.candidate
    let index =
      candidate.sdpMLineIndex ?? lock.withLock { candidate.sdpMid.flatMap { remoteMids.firstIndex(of: $0) } } ?? 0
    dt_webrtc_add_ice_candidate(webrtc, UInt32(max(0, index)), line)
  }

  /// Releases the held ICE-TCP candidates at the fallback's deadline, unless UDP connected first.
  private func armTCPFallback() {
    lock.withLock {
      guard tcpFallbackTimer == nil, !closed, let deadline = tcpFallback.deadline else { return }
      let wait = deadline - secondsSinceStartDuration()
      tcpFallbackTimer = Task.detached { [weak self] in
        try? await Task.sleep(for: max(.zero, wait))
        self?.releaseTCPCandidates()
      }
    }
  }

  private func releaseTCPCandidates() {
    let now = secondsSinceStartDuration()
    let (local, remote) = lock.withLock { () -> ([IceCandidate], [IceCandidate]) in
      guard !closed else { return ([], []) }
      return tcpFallback.release(at: now)
    }
    for candidate in local { candidateSink.yield(candidate) }
    for candidate in remote { add(candidate) }
  }

  public func setAudioEnabled(_ enabled: Bool) async {
    guard let mic else { return }
    dt_set(mic, "mute", enabled ? "false" : "true")
  }

  /// The camera off: frames are dropped before the encoder, so nothing is sent (no
  /// renegotiation). On again: the encoder is asked for a keyframe, which the peer's decoder
  /// needs after the gap.
  public func setVideoEnabled(_ enabled: Bool) async {
    let open = lock.withLock { () -> Bool in
      cameraWanted = enabled
      cameraSending = enabled && !mediaHeld
      return cameraSending
    }
    setCameraValve(open: open)
  }

  private func setCameraValve(open: Bool) {
    guard let valve = dt_bin_get(pipeline, "camera") else { return }
    dt_set(valve, "drop", open ? "false" : "true")
    dt_unref(valve)
    if open { requestKeyframe() }
  }

  /// Audio starts flowing to the encoder once the connection is up (fresh audio, no backlog:
  /// see `GStreamerMedia.pipelineDescription`). Once: a path that dies later does not block.
  private func openAudioGate() {
    guard let valve = dt_bin_get(pipeline, "audiogate") else { return }
    dt_set(valve, "drop", "false")
    dt_unref(valve)
  }

  /// The microphone's valve, before the encoder: closed, no audio packet is made at all (a
  /// muted `volume` would still send silence).
  private func setAudioHeld(_ held: Bool) {
    guard let valve = dt_bin_get(pipeline, "audiohold") else { return }
    dt_set(valve, "drop", held ? "true" : "false")
    dt_unref(valve)
  }

  public func releaseMedia() async {
    let camera = lock.withLock { () -> Bool? in
      guard mediaHeld else { return nil }
      mediaHeld = false
      cameraSending = cameraWanted
      return cameraWanted
    }
    guard let camera else { return }
    setAudioHeld(false)
    if camera { setCameraValve(open: true) }
  }

  /// webrtcbin 1.22 gathers once per connection (it ignores ICE restarts), and libnice made
  /// relay candidates only for a connection configured `relay` (its `force-relay`): no other
  /// candidate exists to surface. Such a connection stays on its relay for its life; the engine
  /// makes every later connection of the call with `all`.
  public func setIceTransportPolicy(_ policy: IceTransportPolicy) async {}

  /// The video transceiver's direction for the next offer or answer; webrtcbin intersects it
  /// with an offer's when it answers. Without a camera this connection never sends.
  public func setVideoDirection(_ direction: MediaDirection) async {
    let wanted = hasCamera ? direction : MediaDirection(sends: false, receives: direction.receives)
    // GstWebRTCRTPTransceiverDirection: inactive 1, sendonly 2, recvonly 3, sendrecv 4. The
    // video transceiver follows the audio one (index 0).
    let value: Int32
    switch wanted {
    case .inactive: value = 1
    case .sendonly: value = 2
    case .recvonly: value = 3
    case .sendrecv: value = 4
    }
    dt_webrtc_set_direction(webrtc, 1, value)
  }

  /// The video codec negotiated, both ways (an answer carries one); nil before the peer's first
  /// description with video.
  public var videoCodec: VideoCodec? { lock.withLock { remoteVideoCodec } }

  /// The remote video received so far (frames decoded, their size and colour).
  public func videoReceived() -> ReceivedVideo {
    let now = secondsSinceStart()
    return lock.withLock {
      var received = receivedVideo
      received.framesPerSecond = frameRate.framesPerSecond(at: now)
      return received
    }
  }

  private func secondsSinceStart() -> Double {
    let elapsed = ContinuousClock.now - startedAt
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  }

  private func secondsSinceStartDuration() -> Duration { ContinuousClock.now - startedAt }

  fileprivate func recordingPath() -> String? {
    lock.withLock { recordingName }?()
  }

  func remoteVideoFrame(width: Int, height: Int, red: Int, green: Int, blue: Int) {
    let seconds = secondsSinceStart()
    let first = lock.withLock { () -> Bool in
      freezeCounter.frame(at: seconds)
      frameRate.frame(at: seconds)
      receivedVideo.frames += 1
      receivedVideo.width = width
      receivedVideo.height = height
      receivedVideo.red = red
      receivedVideo.green = green
      receivedVideo.blue = blue
      return receivedVideo.frames == 1
    }
    if first { reach(.firstVideoFrame) }
  }

  public func sendData(_ data: Data) async throws {
    let target: OpaquePointer? = lock.withLock { channelOpen && !closed ? channel : nil }
    guard let target else { throw GStreamerError.dataChannelNotOpen }
    var error: UnsafeMutablePointer<GError>?
    let sent = String(decoding: data, as: UTF8.self).withCString {
      gst_webrtc_data_channel_send_string_full(target, $0, &error)
    }
    if sent == 0 {
      let message = error.map { String(cString: $0.pointee.message) } ?? "send failed"
      if let error { g_error_free(error) }
      throw GStreamerError.dataChannel(message)
    }
  }

  public func stats() async -> PeerConnectionStats {
    guard !isClosed else { return PeerConnectionStats() }
    let raw = await trackedStats()
    var stats = PeerConnectionStats(
      bytesSent: UInt64(raw.bytes_sent), bytesReceived: UInt64(raw.bytes_received),
      packetsLost: Int64(raw.packets_lost),
      roundTripTime: raw.round_trip_time >= 0 ? raw.round_trip_time : nil,
      localCandidateType: Self.text(raw.local_candidate_type),
      remoteCandidateType: Self.text(raw.remote_candidate_type),
      packetsSent: UInt64(raw.packets_sent), packetsReceived: UInt64(raw.packets_received),
      jitter: raw.jitter >= 0 ? raw.jitter : nil)
    stats.transport = Self.text(raw.local_candidate_protocol)?.lowercased()
    stats.audioCodec = lock.withLock { redundancyNegotiated } ? "red" : "opus"
    // The audio's loss as the network made it (rtpbin counts RED's repairs as received, so
    // its own figure is the loss left after them), and what came too late to play.
    lock.withLock {
      if receiveLoss.expected > 0 { stats.packetsLost = Int64(raw.video_packets_lost) + receiveLoss.lost }
      stats.packetsDiscarded = jitterTarget.lateSoFar
      stats.audioBurstRatio = receiveLoss.burstRatio
    }
    let received = videoReceived()
    let (freezes, target, codec) = lock.withLock { (freezeCounter.freezes, targetBitrate, remoteVideoCodec) }
    if raw.video_bytes_sent > 0 || raw.video_bytes_received > 0 || received.frames > 0 {
      var video = VideoStats()
      video.bytesSent = UInt64(raw.video_bytes_sent)
      video.bytesReceived = UInt64(raw.video_bytes_received)
      video.packetsLost = Int64(raw.video_packets_lost)
      video.framesDecoded = UInt64(received.frames)
      video.frameWidth = received.width
      video.frameHeight = received.height
      video.framesPerSecond = received.framesPerSecond
      video.freezes = freezes
      video.nacksReceived = UInt64(raw.nacks_received)
      video.plisReceived = UInt64(raw.plis_received)
      video.nacksSent = UInt64(raw.nacks_sent)
      video.plisSent = UInt64(raw.plis_sent)
      video.targetBitrate = raw.video_bytes_sent > 0 ? target : 0
      video.codec = codec?.encodingName
      stats.video = video
    }
    return stats
  }

  /// webrtcbin's report, merged with the figures read before: once the other side said BYE (a
  /// hang-up) webrtcbin forgets its streams and reports zeros, so counters never go back and a
  /// figure missing now keeps its last value. Read every second while the connection plays.
  private func trackedStats() async -> dt_stats {
    let raw = await rawStats()
    return lock.withLock {
      guard var merged = lastStats else {
        lastStats = raw
        return raw
      }
      merged.bytes_sent = max(merged.bytes_sent, raw.bytes_sent)
      merged.bytes_received = max(merged.bytes_received, raw.bytes_received)
      merged.packets_sent = max(merged.packets_sent, raw.packets_sent)
      merged.packets_received = max(merged.packets_received, raw.packets_received)
      merged.packets_lost = max(merged.packets_lost, raw.packets_lost)
      merged.video_bytes_sent = max(merged.video_bytes_sent, raw.video_bytes_sent)
      merged.video_bytes_received = max(merged.video_bytes_received, raw.video_bytes_received)
      merged.video_packets_sent = max(merged.video_packets_sent, raw.video_packets_sent)
      merged.video_packets_lost = max(merged.video_packets_lost, raw.video_packets_lost)
      merged.nacks_received = max(merged.nacks_received, raw.nacks_received)
      merged.plis_received = max(merged.plis_received, raw.plis_received)
      merged.nacks_sent = max(merged.nacks_sent, raw.nacks_sent)
      merged.plis_sent = max(merged.plis_sent, raw.plis_sent)
      if raw.jitter >= 0 { merged.jitter = raw.jitter }
      if raw.round_trip_time >= 0 { merged.round_trip_time = raw.round_trip_time }
      if raw.path_fraction_lost >= 0 { merged.path_fraction_lost = raw.path_fraction_lost }
      if raw.path_packets_lost >= 0 { merged.path_packets_lost = raw.path_packets_lost }
      if raw.video_fraction_lost >= 0 { merged.video_fraction_lost = raw.video_fraction_lost }
      if raw.video_round_trip_time >= 0 { merged.video_round_trip_time = raw.video_round_trip_time }
      if raw.local_candidate_type.0 != 0 { merged.local_candidate_type = raw.local_candidate_type }
      if raw.remote_candidate_type.0 != 0 { merged.remote_candidate_type = raw.remote_candidate_type }
      if raw.local_candidate_protocol.0 != 0 { merged.local_candidate_protocol = raw.local_candidate_protocol }
      lastStats = merged
      return merged
    }
  }

  private func rawStats() async -> dt_stats {
    var request = dt_stats()
    request.video_ssrc = hasCamera ? videoSSRC : 0
    let remote = lock.withLock { remoteVideoSSRCs.prefix(8) }
    withUnsafeMutableBytes(of: &request.remote_video_ssrcs) { slots in
      for (i, ssrc) in remote.enumerated() { slots.storeBytes(of: ssrc, toByteOffset: i * 4, as: UInt32.self) }
    }
    request.remote_video_ssrc_count = UInt32(remote.count)
    let template = request
    return await withCheckedContinuation { continuation in
      let promise = makePromise { promise in
        var stats = template
        dt_stats_read(promise, &stats)
        continuation.resume(returning: stats)
      }
      dt_webrtc_get_stats(webrtc, promise.promise)
    }
  }

  /// Once a second while the camera sends: the peer's latest report on our video steers the
  /// encoder's target bitrate (`VideoRateController`).
  private func startRateControl() -> Task<Void, Never> {
    Task.detached { [weak self] in
      var tally = TransportFeedbackTally()
      // Without transport-wide feedback, what the sender used comes from its own counter.
      var lastVideoBytesSent: UInt64?
      while !Task.isCancelled {
        for _ in 0..<10 {
          try? await Task.sleep(for: .milliseconds(100))
          guard let self, !self.isClosed else { return }
          var twcc = dt_twcc()
          if dt_webrtc_twcc(self.webrtc, &twcc) != 0 {
            tally.add(
              .init(
                fractionLost: twcc.loss_percent / 100, bitrateSent: twcc.bitrate_sent,
                bitrateReceived: twcc.bitrate_received, packetsSent: Int(twcc.packets_sent),
                delayGradient: twcc.delta_of_delta / 1e9))
          }
        }
        guard let self, !self.isClosed else { return }
        let transport = tally.take()
        let (sending, reportsUsed) = self.lock.withLock {
          (self.cameraSending, transport == nil && !self.rateController.transportNegotiated)
        }
        guard sending else { continue }
        // Fetched with transport-wide feedback too, though its reports are not used: the count
        // of video packets sent tells a receiver gone silent from a sender with nothing to send
        // (the controller's feedback timeout).
        let raw = await self.rawStats()
        var sentFromStats: Double?
        if reportsUsed {
          let bytes = UInt64(raw.video_bytes_sent)
          if let last = lastVideoBytesSent, bytes >= last {
            sentFromStats = Double(bytes - last) * 8  // over this one-second step
          }
          lastVideoBytesSent = bytes
        }
        // The report on our video if webrtcbin has one, else the one on the path (see dt_stats).
        let video = raw.video_fraction_lost >= 0
        let lost = video ? raw.video_fraction_lost : raw.path_fraction_lost
        let rtt = video ? raw.video_round_trip_time : raw.round_trip_time
        let sample = VideoRateController.Sample(
          fractionLost: lost >= 0 ? lost : nil, roundTripTime: rtt >= 0 ? rtt : nil,
          cumulativeLost: Int64(raw.path_packets_lost), nacksReceived: UInt64(raw.nacks_received),
          packetsSent: UInt64(raw.video_packets_sent), transport: transport)
        let (before, after, resized) = self.lock.withLock { () -> (Int, Int?, VideoResolutionLadder.Size?) in
          let before = self.rateController.target
          let after = self.rateController.observe(sample)
          self.targetBitrate = self.rateController.target
          let resized =
            self.resolutionLadder?.update(
              target: self.targetBitrate, sent: transport?.bitrateSent ?? sentFromStats,
              congestionSeen: !self.rateController.probing)
            == true
          return (before, after, resized ? self.resolutionLadder?.size : nil)
        }
        // The size follows every step, also one with too little feedback to move the rate (an
        // easy picture sends a handful of packets a second).
        if let after, after != before, let encoder = dt_bin_get(self.pipeline, "venc") {
          dt_set(encoder, self.lock.withLock { self.sendingCodec.bitrateProperty }, String(after))
          dt_unref(encoder)
        }
        // A new size reaches the encoder as new caps: it starts again from a keyframe.
        if let resized, let scale = dt_bin_get(self.pipeline, "vscale") {
          dt_set(scale, "caps", "video/x-raw,width=\(resized.width),height=\(resized.height)")
          dt_unref(scale)
        }
      }
    }
  }

  public func close() async {
    let first = lock.withLock { () -> Bool in
      defer { closed = true }
      return !closed
    }
    guard first else { return }
    lock.withLock {
      watchdog?.cancel()
      rateControl?.cancel()
    }
    candidateSink.finish()
    stateSink.finish()
    dataSink.finish()
    milestoneSink.finish()
    remoteCandidateSink.finish()
    // Stopping joins GStreamer's threads and can take a while: not on the caller's executor.
    await Task.detached { self.teardown() }.value
  }

  // MARK: Negotiation helpers

  private func describe(_ field: String, _ emit: (UnsafeMutablePointer<GstPromise>) -> Void) async throws
    -> SessionDescription
  {
    guard !isClosed else { throw GStreamerError.closed }
    let sdp: String = try await withCheckedThrowingContinuation { continuation in
      let promise = makePromise { promise in
        var error: UnsafeMutablePointer<gchar>?
        if let text = dt_promise_take_sdp(promise, field, &error) {
          continuation.resume(returning: String(cString: text))
          g_free(text)
        } else {
          continuation.resume(throwing: GStreamerError.negotiation(error.map { String(cString: $0) } ?? field))
          g_free(error)
        }
      }
      emit(promise.promise)
    }
    return SessionDescription(sdp: sdp)
  }

  private func apply(_ description: SessionDescription, kind: SessionDescriptionKind, local: Bool) async throws {
    guard !isClosed else { throw GStreamerError.closed }
    // GStreamer's SDP parser accepts any text (as an empty session): insist on the version line.
    guard description.sdp.hasPrefix("v=0") else { throw GStreamerError.negotiation("not an SDP session description") }
    // Before applying: the first local candidates may be reported before the reply.
    let mids = Self.mids(of: description.sdp)
    let ssrcs = local ? [] : GStreamerMedia.videoSSRCs(in: description.sdp)
    let twcc = !local && VideoCodec.transportWideCCID(in: description.sdp) != nil
    let codec =
      local
      ? nil
      : kind == .offer
        ? VideoCodec.choice(in: description.sdp, preferring: media.videoCodec)?.codec
        : VideoCodec.answered(in: description.sdp)
    lock.withLock {
      if local {
        localMids = mids
      } else {
        remoteMids = mids
        remoteVideoSSRCs = ssrcs
        if let codec { remoteVideoCodec = codec }
        rateController.transportNegotiated = twcc
      }
    }
    let type = kind == .offer ? GST_WEBRTC_SDP_TYPE_OFFER : GST_WEBRTC_SDP_TYPE_ANSWER
    let error: String? = try await withCheckedThrowingContinuation { continuation in
      let promise = makePromise { promise in
        let error = dt_promise_error(promise)
        continuation.resume(returning: error.map { String(cString: $0) })
        g_free(error)
      }
      // The handler owns the promise's box: on a parse failure the promise is dropped
      // without a reply, so resume here instead.
      if dt_webrtc_set_description(webrtc, local ? 1 : 0, type, description.sdp, promise.promise) == 0 {
        promise.cancel()
        continuation.resume(throwing: GStreamerError.negotiation("the SDP does not parse"))
      }
    }
    if let error { throw GStreamerError.negotiation(error) }
  }

  /// The media kinds of the m-sections with port 0 (rejected).
  static func rejectedSections(in sdp: String) -> [String] {
    sdp.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).compactMap { line in
      let fields = line.split(separator: " ")
      guard line.hasPrefix("m="), fields.count > 1, fields[1] == "0" else { return nil }
      return String(fields[0].dropFirst(2))
    }
  }

  /// The mid of each m-section of an SDP, in order (nil where a section has none).
  static func mids(of sdp: String) -> [String?] {
    var mids: [String?] = []
    for line in sdp.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }) {
      if line.hasPrefix("m=") {
        mids.append(nil)
      } else if line.hasPrefix("a=mid:"), !mids.isEmpty {
        mids[mids.count - 1] = String(line.dropFirst("a=mid:".count))
      }
    }
    return mids
  }

  private func openDataChannelIfNeeded() {
    let needed = lock.withLock { channel == nil && !closed }
    guard needed, let made = dt_webrtc_create_data_channel(webrtc, "dialtone") else { return }
    // create-data-channel returns a new reference: adopt it.
    attach(made, adopt: true)
  }

  fileprivate func attach(_ made: OpaquePointer, adopt: Bool) {
    let attached = lock.withLock { () -> Bool in
      guard channel == nil, !closed, let retained = retainedByCallbacks else { return false }
      if !adopt { dt_channel_ref(made) }
      channel = made
      var table = dt_channel_callbacks(
        ctx: retained.toOpaque(), event: onChannelEvent, text: onChannelText, bytes: onChannelBytes)
      channelCallbacks = dt_channel_connect(made, &table)
      return true
    }
    if attached, dt_channel_ready_state(made) == Int32(GST_WEBRTC_DATA_CHANNEL_STATE_OPEN.rawValue) {
      channelEvent(1)
    } else if !attached, adopt {
      dt_channel_unref(made)
    }
  }

  // MARK: Callbacks (GStreamer threads)

  fileprivate func candidateGathered(mline: UInt32, _ line: String) {
    guard !isClosed else { return }
    let now = secondsSinceStartDuration()
    let admitted = lock.withLock { () -> IceCandidate? in
      let mid = Int(mline) < localMids.count ? localMids[Int(mline)] : nil
      return tcpFallback.local(IceCandidate(candidate: line, sdpMid: mid, sdpMLineIndex: Int(mline)), at: now)
    }
    armTCPFallback()
    if let admitted { candidateSink.yield(admitted) }
  }

  fileprivate func stateChanged(_ property: String, _ value: Int32) {
    guard !isClosed else { return }
    switch property {
    case "connection-state":
      // GstWebRTCPeerConnectionState: new, connecting, connected, disconnected, failed, closed.
      let states: [PeerConnectionState] = [.new, .checking, .connected, .disconnected, .failed, .closed]
      guard value >= 0, Int(value) < states.count else { return }
      let state = states[Int(value)]
      if state == .connected {
        reach(.dtlsConnected)
        keyframeOnFirstConnection()
        openAudioGate()
        applyRedundancyDistance()
      }
      lock.withLock {
        transportConnected = state == .connected
        if state == .connected, watchdog == nil, !closed { watchdog = startWatchdog() }
      }
      stateSink.yield(state)
    case "ice-connection-state":
      // GstWebRTCICEConnectionState: new, checking, connected, completed, failed, disconnected, closed.
      if value == 2 || value == 3 {
        reach(.iceConnected)
        lock.withLock { tcpFallback.connected() }
      }
    case "ice-gathering-state":
      // GstWebRTCICEGatheringState: new, gathering, complete.
      let done = lock.withLock { () -> Bool in
        guard value == 2, !gatheringComplete else { return false }
        gatheringComplete = true
        return true
      }
      if done { candidateSink.yield(nil) }
    default:
      break
    }
  }

  /// The camera opens when the call is set up, before DTLS is: the first keyframe leaves
  /// before the path is up and is lost, and the peer's decoder waits for the next periodic
  /// one (2 s later, and on a full link later still). One is made as the path comes up.
  /// Once per connection.
  private func keyframeOnFirstConnection() {
    let first = lock.withLock { () -> Bool in
      defer { keyframeSent = true }
      return hasCamera && !keyframeSent && !closed
    }
    guard first else { return }
    requestKeyframe()
  }

  /// Asks the camera's encoder for a keyframe (upstream: it never waits for the stream).
  private func requestKeyframe() {
    guard let encoder = dt_bin_get(pipeline, "venc") else { return }
    dt_force_key_unit(encoder)
    dt_unref(encoder)
  }

  /// Each decoded buffer (50 a second): one lock, and a copy only when someone records.
  /// `now`: clock time (ns), `UInt64.max` when unknown. `sink`: where it goes instead of the
  /// media's `remoteAudio` (a section's participant, `GStreamerSections`).
  func remoteAudio(_ samples: UnsafeRawBufferPointer, now: UInt64, to sink: (@Sendable (RemoteAudio) -> Void)? = nil) {
    let (first, resumed, playoutDelayMs) = lock.withLock { () -> (Bool, Bool, Int) in
      let instant = ContinuousClock.now
      lastAudioAt = instant
      defer { stalled = false }
      let first = !closed && reached[.firstAudio] == nil
      if first { reached[.firstAudio] = instant }
      return (
        first, stalled && transportConnected && !closed, jitterTarget.latencyMs + JitterBufferTarget.playoutMarginMs
      )
    }
    if first { milestoneSink.yield(.firstAudio) }
    if resumed { stateSink.yield(.connected) }
    guard let record = sink ?? media.remoteAudio else { return }
    record(
      RemoteAudio(
        samples: Data(samples), arrived: now != UInt64.max ? now : RemoteAudio.clockNow(),
        playoutDelay: UInt64(playoutDelayMs) * 1_000_000))
  }

  /// A jitter buffer rtpbin made: the first one for a remote SSRC that is not video carries the
  /// audio; its latency follows `JitterBufferTarget` from now on.
  fileprivate func newJitterBuffer(_ jitterBuffer: UnsafeMutablePointer<GstElement>, ssrc: UInt32) {
    let latency = lock.withLock { () -> Int? in
      guard !closed, audioJitterBuffer == nil, !remoteVideoSSRCs.contains(ssrc), let callbacks else { return nil }
      dt_object_ref(jitterBuffer)
      audioJitterBuffer = jitterBuffer
      dt_jitterbuffer_watch(jitterBuffer, callbacks)
      dt_jitterbuffer_expect_packets(jitterBuffer)
      return jitterTarget.latencyMs
    }
    if let latency { dt_set(jitterBuffer, "latency", String(latency)) }
  }

  /// A packet reached the audio jitter buffer (`now`: clock time, ns); `recovered`: RED's copy.
  fileprivate func packetArrived(sequence: UInt16, rtpTimestamp: UInt32, recovered: Bool, now: UInt64) {
    let at = Duration.nanoseconds(Int64(clamping: now))
    lock.withLock {
      jitterTarget.arrival(sequence: sequence, rtpTimestamp: rtpTimestamp, at: at, recovered: recovered)
      if !recovered { receiveLoss.packet(sequence: sequence) }
    }
  }

  /// Four times a second: the jitter buffer's latency; once a second: the loss the encoder is
  /// told, from the other side's latest receiver report on what this side sends.
  private func startAudioControl() -> Task<Void, Never> {
    Task.detached { [weak self] in
      var ticks = 0
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(250))
        guard let self, !self.isClosed else { return }
        self.adaptJitterBuffer()
        self.applyRedundancyDistance()
        ticks += 1
        if ticks % 4 == 0 { await self.adaptEncoderToLoss() }
      }
    }
  }

  private func adaptJitterBuffer() {
    // The arrivals' clock: GStreamer's (monotonic, ns).
    let now = Duration.nanoseconds(Int64(clamping: RemoteAudio.clockNow()))
    guard let jitterBuffer = retainedAudioJitterBuffer() else { return }
    defer { dt_unref(jitterBuffer) }
    var lostCount: guint64 = 0
    var lateCount: guint64 = 0
    var duplicateCount: guint64 = 0
    dt_jitterbuffer_counts(jitterBuffer, &lostCount, &lateCount, &duplicateCount)
    let counts = JitterBufferTarget.BufferCounts(late: UInt64(lateCount), duplicates: UInt64(duplicateCount))
    let changed = lock.withLock { jitterTarget.tick(now: now, counts: counts) }
    if let changed { dt_set(jitterBuffer, "latency", String(changed)) }
  }

  private func adaptEncoderToLoss() async {
    let raw = await trackedStats()
    guard media.sends, raw.path_fraction_lost >= 0 else { return }
    let percent = lock.withLock { lossEstimate.report(fractionLost: raw.path_fraction_lost) }
    guard let encoder = dt_bin_get(pipeline, "aenc") else { return }
    dt_set(encoder, "packet-loss-percentage", String(percent))
    dt_unref(encoder)
  }

  /// The audio jitter buffer, with a reference of the caller's (the teardown may release ours
  /// meanwhile); nil before it exists and once closed.
  private func retainedAudioJitterBuffer() -> UnsafeMutablePointer<GstElement>? {
    lock.withLock { () -> UnsafeMutablePointer<GstElement>? in
      guard !closed, let jitterBuffer = audioJitterBuffer else { return nil }
      dt_object_ref(jitterBuffer)
      return jitterBuffer
    }
  }

  /// Received audio packets the jitter buffer declared lost so far: each one reached the decoder
  /// as a loss to conceal.
  public var audioPacketsDeclaredLost: UInt64 {
    guard let jitterBuffer = retainedAudioJitterBuffer() else { return 0 }
    defer { dt_unref(jitterBuffer) }
    var lost: guint64 = 0
    var late: guint64 = 0
    var duplicates: guint64 = 0
    dt_jitterbuffer_counts(jitterBuffer, &lost, &late, &duplicates)
    return UInt64(lost)
  }

  /// The jitter buffer's latency now, ms (what the playout waits for late packets).
  public var jitterBufferLatencyMs: Int { lock.withLock { jitterTarget.latencyMs } }

  /// The loss percentage the audio encoder was last told.
  public var encoderLossPercentage: Int { lock.withLock { lossEstimate.percentage } }

  /// How the audio encoder was set from the other side's description (nil before it came).
  public var audioSendParameters: AudioSendParameters? { lock.withLock { audioSending } }

  private func startWatchdog() -> Task<Void, Never> {
    Task.detached { [weak self] in
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(500))
        guard let self, self.checkStall() else { return }
      }
    }
  }

  /// One watchdog tick; false when the connection is closed.
  private func checkStall() -> Bool {
    let (open, stalledNow) = lock.withLock { () -> (Bool, Bool) in
      guard !closed else { return (false, false) }
      guard transportConnected, !stalled, let last = lastAudioAt, ContinuousClock.now - last > Self.stallAfter else {
        return (true, false)
      }
      stalled = true
      return (true, true)
    }
    if stalledNow { stateSink.yield(.disconnected) }
    return open
  }

  fileprivate func pipelineError(_ message: String) {
    guard !isClosed else { return }
    FileHandle.standardError.write(Data("gstreamer: \(message)\n".utf8))
    stateSink.yield(.failed)
  }

  fileprivate func channelEvent(_ what: Int32) {
    let changed = lock.withLock { () -> Bool in
      let open = what == 1
      defer { channelOpen = open }
      return channelOpen != open
    }
    if changed, what == 1 { reach(.dataChannelOpen) }
  }

  fileprivate func channelData(_ data: Data) {
    guard !isClosed else { return }
    dataSink.yield(data)
  }

  private func reach(_ milestone: Milestone) {
    let now = ContinuousClock.now
    let first = lock.withLock {
      guard reached[milestone] == nil, !closed else { return false }
      reached[milestone] = now
      return true
    }
    if first { milestoneSink.yield(milestone) }
  }

  private var isClosed: Bool { lock.withLock { closed } }

  /// How long a close waits for TURN servers to confirm the allocations are gone: enough for
  /// a slow link's round trip, short enough that a vanished network does not hold the close.
  static let relayReleaseTimeoutMilliseconds: guint = 1000

  // MARK: Teardown

  /// Detach every callback, stop the pipeline (joining its threads), then free what the
  /// callbacks used: after this no callback can run.
  private func teardown() {
    let (table, chan, chanTable) = lock.withLock {
      () -> (UnsafeMutablePointer<dt_webrtc_callbacks>?, OpaquePointer?, UnsafeMutablePointer<dt_channel_callbacks>?) in
      closed = true
      audioControl?.cancel()
      tcpFallbackTimer?.cancel()
      defer {
        callbacks = nil
        channel = nil
        channelCallbacks = nil
      }
      return (callbacks, channel, channelCallbacks)
    }
    if let table { dt_webrtc_disconnect(pipeline, webrtc, table) }
    if let chan, let chanTable { dt_channel_disconnect(chan, chanTable) }
    // Before the agent goes: its TURN allocations are released, not left to time out.
    dt_webrtc_release_relays(webrtc, Self.relayReleaseTimeoutMilliseconds)
    _ = dt_set_state(pipeline, GST_STATE_NULL)
    dt_webrtc_callbacks_free(table)
    g_free(chanTable)
    if let chan { dt_channel_unref(chan) }
    if let mic { dt_unref(mic) }
    if let jitterBuffer = lock.withLock({ audioJitterBuffer }) { dt_unref(jitterBuffer) }
    dt_unref(webrtc)
    dt_unref(pipeline)
    let retained = lock.withLock { () -> Unmanaged<GStreamerPeerConnection>? in
      defer { retainedByCallbacks = nil }
      return retainedByCallbacks
    }
    retained?.release()
  }

  private static func text<T>(_ tuple: T) -> String? {
    withUnsafeBytes(of: tuple) { raw in
      let bytes = raw.prefix { $0 != 0 }
      return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
  }
}

public enum GStreamerError: Error, Sendable, Equatable, CustomStringConvertible {
  case pipeline(String)
  case negotiation(String)
  case dataChannelNotOpen
  case dataChannel(String)
  case closed

  public var description: String {
    switch self {
    case .pipeline(let m): return "pipeline: \(m)"
    case .negotiation(let m): return "negotiation: \(m)"
    case .dataChannelNotOpen: return "the data channel is not open"
    case .dataChannel(let m): return "data channel: \(m)"
    case .closed: return "the connection is closed"
    }
  }
}

// MARK: - Promises

/// A GstPromise whose reply runs `body` once (on a GStreamer thread). The box is retained by
/// the promise's C context until the reply (or `cancel()`).
private final class PromiseReply: @unchecked Sendable {
  // @unchecked: immutable after init; `body` runs once, on one thread.
  let body: (UnsafeMutablePointer<GstPromise>) -> Void
  init(_ body: @escaping (UnsafeMutablePointer<GstPromise>) -> Void) { self.body = body }
}

private struct PendingPromise {
  let promise: UnsafeMutablePointer<GstPromise>
  let box: Unmanaged<PromiseReply>
  /// For a promise that was never handed to webrtcbin (already unreffed by the shim).
  func cancel() { box.release() }
}

private func makePromise(_ body: @escaping (UnsafeMutablePointer<GstPromise>) -> Void) -> PendingPromise {
  let box = Unmanaged.passRetained(PromiseReply(body))
  return PendingPromise(promise: dt_promise_new(onPromise, box.toOpaque()), box: box)
}

private let onPromise: dt_promise_cb = { ctx, promise in
  guard let ctx, let promise else { return }
  let reply = Unmanaged<PromiseReply>.fromOpaque(ctx).takeRetainedValue()
  reply.body(promise)
  gst_promise_unref(promise)
}

// MARK: - C trampolines (no captures: they find the connection through ctx)

private func connection(_ ctx: UnsafeMutableRawPointer?) -> GStreamerPeerConnection? {
  guard let ctx else { return nil }
  return Unmanaged<GStreamerPeerConnection>.fromOpaque(ctx).takeUnretainedValue()
}

private let onCandidate: dt_candidate_cb = { ctx, mline, candidate in
  guard let candidate else { return }
  connection(ctx)?.candidateGathered(mline: mline, String(cString: candidate))
}

private let onState: dt_state_cb = { ctx, property, value in
  guard let property else { return }
  connection(ctx)?.stateChanged(String(cString: property), value)
}

private let onChannel: dt_channel_cb = { ctx, channel in
  guard let channel else { return }
  connection(ctx)?.attach(channel, adopt: false)
}

private let onAudio: dt_audio_cb = { ctx, data, size, now in
  guard let data, size > 0 else { return }
  connection(ctx)?.remoteAudio(UnsafeRawBufferPointer(start: data, count: Int(size)), now: UInt64(now))
}

private let onJitterBuffer: dt_jitterbuffer_cb = { ctx, jitterBuffer, ssrc in
  guard let jitterBuffer else { return }
  connection(ctx)?.newJitterBuffer(jitterBuffer, ssrc: ssrc)
}

private let onArrival: dt_arrival_cb = { ctx, seqnum, timestamp, recovered, now in
  connection(ctx)?.packetArrived(sequence: seqnum, rtpTimestamp: timestamp, recovered: recovered != 0, now: UInt64(now))
}

private let onVideo: dt_video_cb = { ctx, width, height, red, green, blue in
  connection(ctx)?.remoteVideoFrame(
    width: Int(width), height: Int(height), red: Int(red), green: Int(green), blue: Int(blue))
}

private let onRecording: dt_path_cb = { ctx in
  guard let path = connection(ctx)?.recordingPath() else { return nil }
  return g_strdup(path)
}

private let onError: dt_text_cb = { ctx, text in
  connection(ctx)?.pipelineError(text.map { String(cString: $0) } ?? "error")
}

private let onChannelEvent: dt_event_cb = { ctx, what in
  connection(ctx)?.channelEvent(what)
}

private let onChannelText: dt_text_cb = { ctx, text in
  guard let text else { return }
  connection(ctx)?.channelData(Data(String(cString: text).utf8))
}

private let onChannelBytes: dt_bytes_cb = { ctx, data, size in
  guard let data else { return }
  connection(ctx)?.channelData(Data(bytes: data, count: Int(size)))
}
