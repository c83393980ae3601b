import DialtoneProtocol
import Foundation

/// The connection state of a peer connection (`RTCPeerConnectionState` / webrtcbin's
/// `ice-connection-state`, folded into the six states the call engine acts on).
public enum PeerConnectionState: String, Sendable, Equatable, CaseIterable {
  case new, checking, connected, disconnected, failed, closed
}

/// Which local candidates a connection gathers and uses (W3C `RTCIceTransportPolicy`).
public enum IceTransportPolicy: String, Sendable, Equatable {
  /// Host, server-reflexive and relay candidates.
  case all
  /// Relay candidates only (TURN): the other side learns the relay's address, never this
  /// device's own or its NAT's.
  case relay
}

/// Whether a description is an offer or an answer (the wire format carries only the SDP).
public enum SessionDescriptionKind: String, Sendable, Equatable {
  case offer, answer
}

/// A small snapshot of transport statistics.
public struct PeerConnectionStats: Sendable, Equatable {
  public var bytesSent: UInt64
  public var bytesReceived: UInt64
  public var packetsLost: Int64
  /// Current round-trip time of the selected candidate pair, in seconds.
  public var roundTripTime: Double?
  /// e.g. "host", "srflx", "relay" for the local side of the selected pair.
  public var localCandidateType: String?
  /// The remote side of the selected pair.
  public var remoteCandidateType: String?
  public var packetsSent: UInt64
  public var packetsReceived: UInt64
  /// Inbound jitter, in seconds.
  public var jitter: Double?
  /// The video streams' figures; nil when the call has no video section that ever carried any.
  public var video: VideoStats?
  /// The codec of the received audio, as its MIME subtype in lower case ("opus", or "red" when
  /// RED carries it); nil when unknown.
  public var audioCodec: String?
  /// The transport of the selected candidate pair's local candidate ("udp" or "tcp": ICE-TCP);
  /// nil when unknown.
  public var transport: String?
  /// Received audio packets the jitter buffer threw away because they came after their time
  /// (W3C `packetsDiscarded`); a second copy of a packet is not one. Engines on libwebrtc leave it
  /// 0: its counter includes RED's redundant copies.
  public var packetsDiscarded: UInt64 = 0
  /// How bursty the received audio's loss was: G.107's BurstR (mean burst over the random
  /// loss's, 1 for random loss); nil when the engine cannot tell.
  public var audioBurstRatio: Double?

  /// How the received audio repairs loss, for `SpeechQualityEstimate`.
  public var audioProtection: SpeechQualityEstimate.Protection { audioCodec == "red" ? .redundancy : .fec }

  public init(
    bytesSent: UInt64 = 0, bytesReceived: UInt64 = 0, packetsLost: Int64 = 0,
    roundTripTime: Double? = nil, localCandidateType: String? = nil, remoteCandidateType: String? = nil,
    packetsSent: UInt64 = 0, packetsReceived: UInt64 = 0, jitter: Double? = nil
  ) {
    self.bytesSent = bytesSent
    self.bytesReceived = bytesReceived
    self.packetsLost = packetsLost
    self.roundTripTime = roundTripTime
    self.localCandidateType = localCandidateType
    self.remoteCandidateType = remoteCandidateType
    self.packetsSent = packetsSent
    self.packetsReceived = packetsReceived
    self.jitter = jitter
  }
}

/// The video figures of a connection (W3C `inbound-rtp` / `outbound-rtp` with `kind` video).
public struct VideoStats: Sendable, Equatable {
  public var bytesSent: UInt64 = 0
  public var bytesReceived: UInt64 = 0
  public var packetsLost: Int64 = 0
  public var framesDecoded: UInt64 = 0
  public var frameWidth = 0
  public var frameHeight = 0
  /// Frames decoded in the last second (W3C `framesPerSecond`).
  public var framesPerSecond = 0.0
  /// Gaps in the decoded video long enough to be seen as a freeze (W3C `freezeCount`: a frame
  /// later than max(3 × the mean interval, mean + 150 ms)).
  public var freezes = 0
  /// Retransmission requests and keyframe requests the receiver sent us (we sent video)…
  public var nacksReceived: UInt64 = 0
  public var plisReceived: UInt64 = 0
  /// … and those we sent (we received video).
  public var nacksSent: UInt64 = 0
  public var plisSent: UInt64 = 0
  /// What the sender's encoder aims at now, bits per second (0 when not sending).
  public var targetBitrate: Int = 0
  /// The codec of the video, as its MIME subtype ("VP8", "H264"): what is sent, else what is
  /// received; nil when unknown.
  public var codec: String?

  public init() {}
}

/// One WebRTC peer connection, as the call engine needs it. Implemented over Google's WebRTC
/// framework (Apple package) and over GStreamer webrtcbin (Linux).
///
/// Streams are single-consumer: the engine iterates each once. An implementation finishes its
/// streams when it is closed; the engine stops iterating (detaches) *before* it calls `close()`,
/// so events emitted while closing never reach a call.
public protocol PeerConnection: AnyObject, Sendable {
  /// Whether `createOffer(iceRestart: true)` really restarts ICE on this connection.
  /// GStreamer 1.22 ignores ICE restarts: it reports `false`, and the engine then renegotiates
  /// on a fresh connection from the factory.
  var canRestartIce: Bool { get }

  /// Local candidates as they are gathered; `nil` = end of candidates for this generation.
  var localCandidates: AsyncStream<IceCandidate?> { get }
  /// Connection state changes.
  var connectionStates: AsyncStream<PeerConnectionState> { get }
  /// Messages received on the data channel (if the implementation has one).
  var dataChannelMessages: AsyncStream<Data> { get }

  func createOffer(iceRestart: Bool) async throws -> SessionDescription
  func createAnswer() async throws -> SessionDescription
  func setLocalDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws
  func setRemoteDescription(_ description: SessionDescription, kind: SessionDescriptionKind) async throws
  func addRemoteCandidate(_ candidate: IceCandidate) async throws

  func setAudioEnabled(_ enabled: Bool) async
  /// The camera on or off while the video section sends (no renegotiation).
  func setVideoEnabled(_ enabled: Bool) async
  /// The direction the video section asks for in the next offer or answer (renegotiation
  /// upgrades a call to video and back). A connection without a camera never sends: it
  /// narrows `sendrecv` to `recvonly` and `sendonly` to `inactive`.
  func setVideoDirection(_ direction: MediaDirection) async
  /// Sends on the data channel; throws if there is none or it is not open.
  func sendData(_ data: Data) async throws
  /// A connection made with `mediaHeld` starts sending media (a pre-connected leg whose call
  /// was accepted, protocol.md 11); idempotent, and nothing for any other connection.
  func releaseMedia() async
  /// The candidates allowed from now on. The engine relaxes a private pre-connect leg (made
  /// `relay`) to `all` once its call is answered. libwebrtc then surfaces the host and
  /// server-reflexive candidates it gathered but held back (continual gathering), and may move
  /// the call to a direct pair without an ICE restart. webrtcbin 1.22 cannot: libnice gathered
  /// relay candidates only, so such a connection stays on its relay for its life.
  func setIceTransportPolicy(_ policy: IceTransportPolicy) async
  /// A group call's single subscriber connection (`multistream`): whose media each m-section
  /// of the offer about to be applied carries (sections not listed are inactive). An engine
  /// that keeps each participant's media apart routes what arrives on a mid by this; the map
  /// changes with every offer, and a mid may carry someone else after a renegotiation.
  func setRemoteSections(_ sections: [GroupStreamSection]) async

  func stats() async -> PeerConnectionStats
  /// Closes the connection; idempotent.
  func close() async
}

/// What a fresh peer connection is made with.
public struct PeerConnectionConfiguration: Sendable, Equatable {
  public var iceServers: [IceServer]
  /// Reserve a video section from the first offer (webrtcbin cannot add one mid-call; an
  /// upgrade to video changes its direction). Every 1:1 call's connection has one.
  public var video: Bool
  public var dataChannel: Bool
  /// Set for a group call's receive-only stream: whose media it carries (an engine may keep
  /// each participant's audio apart, and sends nothing on it).
  public var remoteParticipant: Peer?
  /// Set for a group call's publisher stream: it only sends (the others' media comes on their
  /// own streams), so without a camera it has no video section at all. An SFU rejects a video
  /// section with nothing to send, and webrtcbin 1.22 cannot take an answer that rejects one.
  public var sendOnly: Bool
  /// Set for a group call's single subscriber connection (protocol.md 20.9): receive-only, it
  /// takes every section the SFU offers, and the SFU renegotiates it (new sections as
  /// participants arrive, inactive ones as they leave, reused later). Its sections' owners come
  /// with `setRemoteSections(_:)`.
  public var multistream = false
  /// A pre-connected leg (protocol.md 11): ICE and DTLS go ahead, but no media is sent, from
  /// the source (no RTP carrying audio or video at all, not silence), until `releaseMedia()`.
  public var mediaHeld = false
  /// Which candidates it gathers: `relay` for a callee's private pre-connect leg (the caller
  /// learns no address of a device that has not answered), `all` otherwise.
  public var iceTransportPolicy = IceTransportPolicy.all

  public init(
    iceServers: [IceServer], video: Bool, dataChannel: Bool = false, remoteParticipant: Peer? = nil,
    sendOnly: Bool = false, multistream: Bool = false
  ) {
    self.iceServers = iceServers
    self.video = video
    self.dataChannel = dataChannel
    self.remoteParticipant = remoteParticipant
    self.sendOnly = sendOnly
    self.multistream = multistream
  }
}

/// Makes fresh peer connections (one at call start, another when a connection that cannot
/// restart ICE must be replaced).
public protocol PeerConnectionFactory: Sendable {
  func makePeerConnection(_ configuration: PeerConnectionConfiguration) async throws -> any PeerConnection
  /// Connections like these will probably be asked for soon (a group call rings, or is being
  /// created or joined): a factory may start building them now, off the call's critical path,
  /// and hand them out from `makePeerConnection`. Returns at once; by default it does nothing.
  func prepare(_ configurations: [PeerConnectionConfiguration])
}

extension PeerConnectionFactory {
  public func prepare(_ configurations: [PeerConnectionConfiguration]) {}
}
