import DialtoneClient
import DialtoneProtocol
import Foundation
@preconcurrency import WebRTC

/// `PeerConnection` over Google's WebRTC (`RTCPeerConnection`, unified plan).
///
/// Thin by design: it maps calls and events one to one. Trickle ICE, buffering of early
/// remote candidates, the ICE-restart policy and teardown order are `CallEngine`'s.
///
/// - Tracks are added with `addTrack` (`add(_:streamIds:)`), on both sides, never with
///   `addTransceiver`: a callee builds its connection before it applies the remote offer, and
///   only transceivers created by `addTrack` are paired with the offer's m-sections (JSEP,
///   RFC 8829 section 5.10). A transceiver from `addTransceiver` stays unpaired, the offer gets
///   fresh receive-only transceivers, and the callee would answer `recvonly`: the caller would
///   hear and see nothing.
/// - Audio: one audio track, created at once. Whether sound actually flows is decided by
///   `RTCAudioSession` in manual-audio mode (`WebRTCCallMedia`): only CallKit's `didActivate`
///   turns it on.
/// - Video: when the configuration asks for it, a video track on the factory's shared
///   `videoSource`, which `CameraCapture` feeds (the camera is one per device, so a replacement
///   connection sends the camera that is already running).
/// - Data channel: an in-band channel labelled `"dialtone"`. Both sides may open one; messages
///   are read from every channel, sent on the first open one.
/// - Candidates: gathered once per ICE generation (`gatherOnce`), each yielded as it comes,
///   then `nil` when gathering completes. An ICE restart starts a new generation. A private
///   pre-connect leg (`iceTransportPolicy` `relay`) gathers continually instead and yields its
///   relay candidates only, until `setIceTransportPolicy(.all)` after the answer surfaces the
///   host and server-reflexive ones it held back (no ICE restart; it never yields `nil`).
/// - `canRestartIce` is true: libwebrtc honours `IceRestart` in offers.
/// - A group call's single subscriber connection (`multistream`, protocol.md 20.9) has no local
///   track: every section comes from the SFU's offers, and libwebrtc takes their renegotiations
///   (sections added, made inactive, reused) as they are. Audio of every section plays mixed;
///   `remoteVideoTrack(of:)` finds a participant's video by the sections of the latest offer.
public final class WebRTCPeerConnection: NSObject, PeerConnection, @unchecked Sendable {
  public static let dataChannelLabel = "dialtone"
  /// The media stream id of the local tracks.
  public static let streamId = "dialtone"

  public let canRestartIce = true
  public let localCandidates: AsyncStream<IceCandidate?>
  public let connectionStates: AsyncStream<PeerConnectionState>
  public let dataChannelMessages: AsyncStream<Data>
  /// Remote video tracks as they arrive (attach them to an `RTCMTLVideoView`).
  public let remoteVideoTracks: AsyncStream<RTCVideoTrack>

  /// The local camera's track (for a local preview), when video was requested.
  public let localVideoTrack: RTCVideoTrack?
  public let localAudioTrack: RTCAudioTrack

  private let pc: RTCPeerConnection
  private let candidateSink: AsyncStream<IceCandidate?>.Continuation
  private let stateSink: AsyncStream<PeerConnectionState>.Continuation
  private let dataSink: AsyncStream<Data>.Continuation
  private let remoteVideoSink: AsyncStream<RTCVideoTrack>.Continuation

  // `lock` guards the mutable state below (WebRTC calls the delegate on its signaling thread).
  private let lock = NSLock()
  private var channels: [RTCDataChannel] = []
  private var closed = false
  private var lastState: PeerConnectionState = .new
  /// A pre-connected leg's senders and their tracks (protocol.md 11): a sender without a
  /// track sends no RTP at all until `releaseMedia()` gives it back.
  private var heldSenders: [(sender: RTCRtpSender, track: RTCMediaStreamTrack)] = []
  /// The subscriber connection: who each section of the latest offer carries.
  private var remoteSections: [GroupStreamSection] = []

  /// - Parameter videoSource: the factory's shared camera source; nil for an audio-only call.
  init(factory: RTCPeerConnectionFactory, videoSource: RTCVideoSource?, configuration: PeerConnectionConfiguration)
    throws
  {
    let rtcConfig = RTCConfiguration()
    rtcConfig.sdpSemantics = .unifiedPlan
    rtcConfig.iceServers = configuration.iceServers.map {
      RTCIceServer(urlStrings: $0.urls, username: $0.username, credential: $0.credential)
    }
    rtcConfig.bundlePolicy = .maxBundle
    rtcConfig.rtcpMuxPolicy = .require
    rtcConfig.continualGatheringPolicy = .gatherOnce
    if configuration.iceTransportPolicy == .relay {
      // libwebrtc still gathers host and server-reflexive candidates, but only signals relay
      // ones; continual gathering keeps the session alive so that relaxing the policy later
      // surfaces the held-back candidates (RTCConfiguration.h).
      rtcConfig.iceTransportPolicy = .relay
      rtcConfig.continualGatheringPolicy = .gatherContinually
      rtcConfig.shouldSurfaceIceCandidatesOnIceTransportTypeChanged = true
    }
    rtcConfig.tcpCandidatePolicy = .enabled
    // Gather before the offer is made: the first candidates leave with or right after it.
    rtcConfig.iceCandidatePoolSize = 1
    // libwebrtc's default DTLS certificate is ECDSA P-256: cheap to generate.

    (localCandidates, candidateSink) = AsyncStream<IceCandidate?>.makeStream(bufferingPolicy: .unbounded)
    (connectionStates, stateSink) = AsyncStream<PeerConnectionState>.makeStream(bufferingPolicy: .unbounded)
    (dataChannelMessages, dataSink) = AsyncStream<Data>.makeStream(bufferingPolicy: .bufferingNewest(256))
    (remoteVideoTracks, remoteVideoSink) = AsyncStream<RTCVideoTrack>.makeStream(bufferingPolicy: .bufferingNewest(4))

    let audioConstraints = RTCMediaConstraints(mandatoryConstraints: nil, optionalConstraints: nil)
    let audioSource = factory.audioSource(with: audioConstraints)
    localAudioTrack = factory.audioTrack(with: audioSource, trackId: "audio0")
    localVideoTrack = videoSource.map { factory.videoTrack(with: $0, trackId: "video0") }

    // The delegate is set after super.init (below): create with a trampoline that forwards to
    // `self` once it exists.
    let trampoline = DelegateTrampoline()
    let constraints = RTCMediaConstraints(mandatoryConstraints: nil, optionalConstraints: nil)
    guard let pc = factory.peerConnection(with: rtcConfig, constraints: constraints, delegate: trampoline) else {
      throw WebRTCPeerConnectionError.creationFailed
    }
    self.pc = pc
    // RTCPeerConnection holds its delegate weakly: keep the trampoline as long as `self`.
    self.trampoline = trampoline
    super.init()
    trampoline.target = self
    channelTrampoline.target = self

    // addTrack, not addTransceiver: see the type comment (JSEP section 5.10). A subscriber
    // connection only receives.
    let streamIds = [Self.streamId]
    let tracks: [RTCMediaStreamTrack] =
      configuration.multistream ? [] : [localAudioTrack] + (localVideoTrack.map { [$0] } ?? [])
    for track in tracks {
      let sender = pc.add(track, streamIds: streamIds)
      if configuration.mediaHeld, let sender {
        sender.track = nil
        heldSenders.append((sender, track))
      }
    }
    if configuration.dataChannel {
      let dcConfig = RTCDataChannelConfiguration()
      dcConfig.isOrdered = true
      if let channel = pc.dataChannel(forLabel: Self.dataChannelLabel, configuration: dcConfig) {
        adopt(channel)
      }
    }
  }

  private let trampoline: DelegateTrampoline

  // MARK: PeerConnection

  public func createOffer(iceRestart: Bool) async throws -> SessionDescription {
    let mandatory = iceRestart ? [kRTCMediaConstraintsIceRestart: kRTCMediaConstraintsValueTrue] : nil
    let constraints = RTCMediaConstraints(mandatoryConstraints: mandatory, optionalConstraints: nil)
    return try await withCheckedThrowingContinuation { continuation in
      pc.offer(for: constraints) { sdp, error in
        if let sdp {
          continuation.resume(returning: SessionDescription(sdp: sdp.sdp))
        } else {
          continuation.resume(throwing: error ?? WebRTCPeerConnectionError.noDescription)
        }
      }
    }
  }

  public func createAnswer() async throws -> SessionDescription {
    let constraints = RTCMediaConstraints(mandatoryConstraints: nil, optionalConstraints: nil)
    return try await withCheckedThrowingContinuation { continuation in
      pc.answer(for: constraints) { sdp, error in
        if let sdp {
          continuation.resume(returning: SessionDescription(sdp: sdp.sdp))
        } else {
          continuation.resume(throwing: error ?? WebRTCPeerConnectionError.noDescription)
        }
      }
    }
  }

  public func setLocalDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws {
    let rtc = RTCSessionDescription(type: kind.rtcType, sdp: description.sdp)
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
      pc.setLocalDescription(rtc) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }

  public func setRemoteDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws {
    let rtc = RTCSessionDescription(type: kind.rtcType, sdp: description.sdp)
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
      pc.setRemoteDescription(rtc) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }

  public func addRemoteCandidate(_ candidate: IceCandidate) async throws {
    // An empty candidate is a browser's end-of-candidates marker: nothing to add.
    guard !candidate.candidate.isEmpty else { return }
    let rtc = RTCIceCandidate(
      sdp: candidate.candidate, sdpMLineIndex: Int32(candidate.sdpMLineIndex ?? 0), sdpMid: candidate.sdpMid)
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
      pc.add(rtc) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }

  public func setAudioEnabled(_ enabled: Bool) async {
    localAudioTrack.isEnabled = enabled
  }

  public func setVideoEnabled(_ enabled: Bool) async {
    localVideoTrack?.isEnabled = enabled
  }

  /// A private leg answered: `setConfiguration` with the wider policy surfaces the candidates
  /// gathered but held back, which trickle like any other (no ICE restart; libwebrtc may then
  /// select a direct pair).
  public func setIceTransportPolicy(_ policy: IceTransportPolicy) async {
    let config = pc.configuration
    let wanted: RTCIceTransportPolicy = policy == .relay ? .relay : .all
    guard config.iceTransportPolicy != wanted else { return }
    config.iceTransportPolicy = wanted
    _ = pc.setConfiguration(config)
  }

  /// The video transceiver's direction for the next offer or answer (JSEP 4.2.4): libwebrtc
  /// intersects it with the offer's when it answers.
  public func setVideoDirection(_ direction: MediaDirection) async {
    let wanted = localVideoTrack == nil ? MediaDirection(sends: false, receives: direction.receives) : direction
    guard let transceiver = pc.transceivers.first(where: { $0.mediaType == .video }) else { return }
    var error: NSError?
    transceiver.setDirection(wanted.rtcDirection, error: &error)
  }

  public func releaseMedia() async {
    let held = lock.withLock { () -> [(sender: RTCRtpSender, track: RTCMediaStreamTrack)] in
      defer { heldSenders = [] }
      return heldSenders
    }
    for entry in held { entry.sender.track = entry.track }
  }

  public func sendData(_ data: Data) async throws {
    let channel = lock.withLock { channels.first { $0.readyState == .open } }
    guard let channel else { throw WebRTCPeerConnectionError.dataChannelNotOpen }
    guard channel.sendData(RTCDataBuffer(data: data, isBinary: true)) else {
      throw WebRTCPeerConnectionError.dataChannelSendFailed
    }
  }

  public func stats() async -> PeerConnectionStats {
    // Converted on WebRTC's thread, so only plain values cross into the caller.
    let entries: [StatsReportEntry] = await withCheckedContinuation { continuation in
      pc.statistics { report in continuation.resume(returning: Self.entries(report.statistics)) }
    }
    return PeerConnectionStats(folding: entries)
  }

  public func setRemoteSections(_ sections: [GroupStreamSection]) async {
    lock.withLock { remoteSections = sections }
  }

  /// The subscriber connection: `participant`'s video track (attach it to an `RTCMTLVideoView`),
  /// nil while no section of the latest offer carries their video. A section the SFU reuses
  /// for someone else keeps its track: look it up again after each `remoteStreamAdded`.
  public func remoteVideoTrack(of participant: Peer) -> RTCVideoTrack? {
    let mid = lock.withLock { remoteSections.first { $0.from == participant && $0.kind == .video }?.mid }
    guard let mid else { return nil }
    return pc.transceivers.first { $0.mid == mid }?.receiver.track as? RTCVideoTrack
  }

  public func close() async {
    let wasOpen: Bool = lock.withLock {
      defer { closed = true }
      return !closed
    }
    guard wasOpen else { return }
    let open = lock.withLock { channels }
    for channel in open { channel.close() }
    pc.close()
    candidateSink.finish()
    stateSink.yield(.closed)
    stateSink.finish()
    dataSink.finish()
    remoteVideoSink.finish()
  }

  // MARK: Stats

  /// A WebRTC stats report as plain entries, for `PeerConnectionStats(folding:)` (the folding
  /// is DialtoneClient's, tested on Linux). Numbers (booleans too) become `.number`, strings
  /// `.string`; arrays and dictionaries are dropped (the folding reads none).
  static func entries(_ statistics: [String: RTCStatistics]) -> [StatsReportEntry] {
    statistics.values.map { stat in
      var values: [String: StatsReportEntry.Value] = [:]
      for (key, value) in stat.values {
        if let number = value as? NSNumber {
          values[key] = .number(number.doubleValue)
        } else if let string = value as? String {
          values[key] = .string(string)
        }
      }
      return StatsReportEntry(id: stat.id, type: stat.type, values: values)
    }
  }

  // MARK: Delegate events (called by the trampoline on WebRTC's signaling thread)

  fileprivate func didChange(_ state: RTCPeerConnectionState) {
    let mapped = PeerConnectionState(state)
    let emit: Bool = lock.withLock {
      guard !closed, mapped != lastState else { return false }
      lastState = mapped
      return true
    }
    if emit { stateSink.yield(mapped) }
  }

  fileprivate func didGenerate(_ candidate: RTCIceCandidate) {
    guard !lock.withLock({ closed }) else { return }
    candidateSink.yield(
      IceCandidate(
        candidate: candidate.sdp, sdpMid: candidate.sdpMid, sdpMLineIndex: Int(candidate.sdpMLineIndex)))
  }

  fileprivate func didChange(_ gathering: RTCIceGatheringState) {
    guard gathering == .complete, !lock.withLock({ closed }) else { return }
    candidateSink.yield(nil)
  }

  fileprivate func didAdd(_ receiver: RTCRtpReceiver) {
    if let track = receiver.track as? RTCVideoTrack { remoteVideoSink.yield(track) }
  }

  fileprivate func didOpen(_ channel: RTCDataChannel) {
    adopt(channel)
  }

  fileprivate func didReceive(_ buffer: RTCDataBuffer) {
    guard !lock.withLock({ closed }) else { return }
    dataSink.yield(buffer.data)
  }

  private func adopt(_ channel: RTCDataChannel) {
    let known: Bool = lock.withLock {
      if channels.contains(where: { $0 === channel }) { return true }
      channels.append(channel)
      return false
    }
    if !known { channel.delegate = channelTrampoline }
  }

  /// Data channels hold their delegate weakly too; one forwarder serves them all.
  private let channelTrampoline = ChannelTrampoline()
}

public enum WebRTCPeerConnectionError: Error, Sendable, Equatable {
  case creationFailed
  case noDescription
  case dataChannelNotOpen
  case dataChannelSendFailed
}

extension SessionDescriptionKind {
  var rtcType: RTCSdpType {
    switch self {
    case .offer: return .offer
    case .answer: return .answer
    }
  }
}

extension PeerConnectionState {
  /// `RTCPeerConnectionState` (the combined ICE + DTLS state) in the engine's six states.
  init(_ state: RTCPeerConnectionState) {
    switch state {
    case .new: self = .new
    case .connecting: self = .checking
    case .connected: self = .connected
    case .disconnected: self = .disconnected
    case .failed: self = .failed
    case .closed: self = .closed
    @unknown default: self = .checking
    }
  }
}

// MARK: Delegate forwarders

/// `RTCPeerConnectionDelegate` → `WebRTCPeerConnection`. Exists because the delegate must be
/// given to the factory before `WebRTCPeerConnection` finishes initialising.
private final class DelegateTrampoline: NSObject, RTCPeerConnectionDelegate, @unchecked Sendable {
  weak var target: WebRTCPeerConnection?

  func peerConnection(_ peerConnection: RTCPeerConnection, didChange stateChanged: RTCSignalingState) {}
  func peerConnection(_ peerConnection: RTCPeerConnection, didAdd stream: RTCMediaStream) {}
  func peerConnection(_ peerConnection: RTCPeerConnection, didRemove stream: RTCMediaStream) {}
  func peerConnectionShouldNegotiate(_ peerConnection: RTCPeerConnection) {
    // Renegotiation is driven by CallEngine (offers, ICE restarts), never by this callback.
  }
  func peerConnection(_ peerConnection: RTCPeerConnection, didChange newState: RTCIceConnectionState) {
    // The combined RTCPeerConnectionState below is what the engine acts on.
  }
  func peerConnection(_ peerConnection: RTCPeerConnection, didChange newState: RTCIceGatheringState) {
    target?.didChange(newState)
  }
  func peerConnection(_ peerConnection: RTCPeerConnection, didGenerate candidate: RTCIceCandidate) {
    target?.didGenerate(candidate)
  }
  func peerConnection(_ peerConnection: RTCPeerConnection, didRemove candidates: [RTCIceCandidate]) {}
  func peerConnection(_ peerConnection: RTCPeerConnection, didOpen dataChannel: RTCDataChannel) {
    target?.didOpen(dataChannel)
  }
  func peerConnection(_ peerConnection: RTCPeerConnection, didChange newState: RTCPeerConnectionState) {
    target?.didChange(newState)
  }
  func peerConnection(
    _ peerConnection: RTCPeerConnection, didAdd rtpReceiver: RTCRtpReceiver, streams mediaStreams: [RTCMediaStream]
  ) {
    target?.didAdd(rtpReceiver)
  }
}

private final class ChannelTrampoline: NSObject, RTCDataChannelDelegate, @unchecked Sendable {
  weak var target: WebRTCPeerConnection?

  func dataChannelDidChangeState(_ dataChannel: RTCDataChannel) {}
  func dataChannel(_ dataChannel: RTCDataChannel, didReceiveMessageWith buffer: RTCDataBuffer) {
    target?.didReceive(buffer)
  }
}

extension MediaDirection {
  fileprivate var rtcDirection: RTCRtpTransceiverDirection {
    switch self {
    case .sendrecv: return .sendRecv
    case .sendonly: return .sendOnly
    case .recvonly: return .recvOnly
    case .inactive: return .inactive
    }
  }
}
