import DialtoneClient
import DialtoneProtocol
import Foundation

/// What a GStreamer peer connection sends and what it does with what it receives.
public struct GStreamerMedia: Sendable {
  public enum AudioSource: Sendable, Equatable {
    /// A sine tone (the CLI's `--audio tone`).
    case tone(frequency: Double)
    /// A WAV file, played once in real time, then silence. It plays once per media: a call's
    /// later connections (an ICE restart's) continue where it is (`AudioFilePlayback`).
    case wavFile(path: String)
    case silence
  }

  /// A camera: a `videotestsrc` pattern, or a video file played once in real time (then the
  /// camera sends nothing more), at a fixed size and frame rate.
  public struct VideoSource: Sendable, Equatable {
    public enum Content: Sendable, Equatable {
      /// A `videotestsrc` pattern: solid `red`, `green`, `blue`, `white`, `black`, or `smpte`, `ball`, ...
      case pattern(String)
      /// Any file GStreamer demuxes and decodes (WebM, MP4, Matroska, Ogg, ...), scaled and
      /// resampled to the source's size and frame rate.
      case file(String)
    }

    public var content: Content
    public var width: Int
    public var height: Int
    public var framerate: Int

    public init(pattern: String = "smpte", width: Int = 640, height: Int = 360, framerate: Int = 30) {
      self.init(content: .pattern(pattern), width: width, height: height, framerate: framerate)
    }

    public init(content: Content, width: Int = 640, height: Int = 360, framerate: Int = 30) {
      self.content = content
      self.width = width
      self.height = height
      self.framerate = framerate
    }

    /// The `videotestsrc` patterns this engine accepts.
    public static let patterns: Set<String> = [
      "smpte", "snow", "black", "white", "red", "green", "blue", "checkers-1", "checkers-8", "circular", "ball",
      "smpte75", "bar", "pinwheel", "spokes", "gradient", "colors",
    ]

    /// The raw frames, up to the caps every source is brought to.
    var sourceDescription: String {
      let caps = "video/x-raw,width=\(width),height=\(height),framerate=\(framerate)/1"
      switch content {
      case .pattern(let pattern):
        return "videotestsrc is-live=true pattern=\(pattern) ! \(caps)"
      case .file:
        // A file is not live: `identity sync=true` releases each frame at its time, as a
        // camera would (the location is set on `videofile` after parsing, unquoted).
        return "filesrc name=videofile ! decodebin ! videoconvert ! videoscale ! videorate ! "
          + "video/x-raw,width=\(width),height=\(height),framerate=\(framerate)/1,pixel-aspect-ratio=1/1 ! "
          + "identity name=videoclock sync=true"
      }
    }
  }

  public var audio: AudioSource
  /// What video calls send; nil: no camera (a video call only receives).
  public var video: VideoSource?
  /// The codec this side sends and offers. An answer uses it if the offer has it, else the
  /// other one (`VideoCodec.choice`); both are always decoded.
  public var videoCodec: VideoCodec = .vp8
  /// 1:1 calls: write the received video, as it came (no re-encoding), to this file: WebM for
  /// VP8, MPEG-TS for H.264 (a call's later connections to `name-2.webm`, ...).
  public var recordVideo: String?
  /// Only relay candidates (TURN): `iceTransportPolicy = relay`.
  public var relayOnly: Bool
  /// Decoded remote audio, as it leaves the decoder. Called on a GStreamer streaming thread;
  /// copy and return quickly.
  public var remoteAudio: (@Sendable (RemoteAudio) -> Void)?
  /// Group calls: where the decoded audio of one remote participant's stream goes (each
  /// arrives on a receive-only connection of its own). Nil: `remoteAudio`.
  public var participantAudio: (@Sendable (Peer) -> (@Sendable (RemoteAudio) -> Void)?)?
  /// What this side asks for and sends (FEC, DTX, packet time, bitrate, RED): Dialtone's
  /// rules, the same on every engine.
  public var audioProfile = AudioProfile.standard
  /// The receiving jitter buffer's latency, ms, fixed instead of adapted (`JitterBufferTarget`);
  /// for comparisons only.
  public var fixedJitterBufferMs: Int?
  /// Where a `.wavFile` source is, shared by every connection made with this media.
  let filePlayback = AudioFilePlayback()
  /// False for a group call's receive-only stream: no send branch at all (nothing is encoded);
  /// webrtcbin answers the offer from a receive-only transceiver of its own.
  var sends = true

  public init(
    audio: AudioSource = .tone(frequency: 440), relayOnly: Bool = false,
    remoteAudio: (@Sendable (RemoteAudio) -> Void)? = nil,
    participantAudio: (@Sendable (Peer) -> (@Sendable (RemoteAudio) -> Void)?)? = nil, video: VideoSource? = nil
  ) {
    self.video = video
    self.audio = audio
    self.relayOnly = relayOnly
    self.remoteAudio = remoteAudio
    self.participantAudio = participantAudio
  }

  /// The media of a receive-only stream carrying `participant`: nothing worth sending, the
  /// received audio to the participant's sink.
  func receiving(from participant: Peer) -> GStreamerMedia {
    var media = self
    media.audio = .silence
    media.sends = false
    if let participantAudio { media.remoteAudio = participantAudio(participant) }
    return media
  }

  /// The send branch, ending in webrtcbin's first sink pad, so the audio transceiver exists
  /// before the first offer (adding the first track mid-call crashes webrtcbin 1.22).
  ///
  /// `ssrc` is fixed in the payloader and its caps, so the SDP announces the SSRC the packets
  /// really carry: an SFU (Janus) drops packets of an SSRC it was not told about, and a spare
  /// connection's offer is made before the payloader has picked one of its own.
  func pipelineDescription(ssrc: UInt32, videoSSRC: UInt32 = 0, sendsVideo: Bool = false) -> String {
    guard sends else {
      // A lone element would be parsed as that element rather than a pipeline: an idle live
      // source into a fake sink keeps it a pipeline and costs nothing.
      return
        "webrtcbin name=webrtc bundle-policy=max-bundle latency=\(fixedJitterBufferMs ?? JitterBufferTarget.startMs) "
        + "appsrc is-live=true ! fakesink async=false sync=false"
    }
    // Every source hands the encoder one 20 ms buffer every 20 ms, so each packet leaves as its
    // frame is complete: evenly paced (a 23 ms source buffer, audiotestsrc's default, makes two
    // frames come out of some buffers and none out of others).
    let raw = "audio/x-raw,rate=48000,channels=1"
    let source: String
    switch audio {
    case .tone(let frequency):
      source = "audiotestsrc is-live=true wave=sine freq=\(frequency) volume=0.4 samplesperbuffer=960 ! \(raw)"
    case .silence:
      source = "audiotestsrc is-live=true wave=silence samplesperbuffer=960 ! \(raw)"
    case .wavFile:
      // A file is not live: each 20 ms piece is released at its time.
      // Kept at its own rate: the encoder takes 8, 12, 16, 24 and 48 kHz, and a 16 kHz
      // (wideband) file resampled to 48 kHz first costs its band bits (PESQ-WB 3.9, not 4.25).
      source =
        "filesrc name=file ! wavparse name=wav ! audioconvert ! audio/x-raw,channels=1 ! "
        + "audiobuffersplit output-buffer-duration=1/50 ! identity sync=true"
    }
    var camera = ""
    if sendsVideo, let video {
      let first = VideoResolutionLadder(
        width: video.width, height: video.height, framerate: video.framerate, start: Self.startVideoBitrate
      ).size
      // The camera drops frames the encoder cannot keep up with rather than queue them
      // (latency), and the valve right before the encoder turns it off at once. It starts
      // closed: the call engine opens it once the other side was told we send video. The
      // encoder and payloader between the valve and `vcaps` are a bin of their own
      // (`VideoCodec.encoder`), installed once the codec is known and replaced if an offer
      // asks for the other codec.
      // `vscale` is where `VideoResolutionLadder` sets the size: the first one for the start
      // bitrate, then lower on a narrow link and back up.
      camera =
        " \(video.sourceDescription) ! videoscale ! "
        + "capsfilter name=vscale caps=\"video/x-raw,width=\(first.width),height=\(first.height)\" ! videoconvert ! "
        + "queue leaky=downstream max-size-buffers=2 max-size-bytes=0 max-size-time=0 ! valve name=camera drop=true "
        + "capsfilter name=vcaps caps=\"\(videoCodec.caps(ssrc: videoSSRC))\" ! webrtc."
    }
    // `audiogate` stays closed until the connection is up: webrtcbin holds the stream until
    // then, and what was captured meanwhile would otherwise leave in a burst once it is (the
    // receiver would have to squeeze it into its playout). The queue only decouples the
    // encoder from the source; it is bounded, and drops the oldest if something stalls.
    // The encoder starts from the profile; the other side's description sets it (`AudioSDP`).
    // latency: the jitter buffer's delay to start with (`JitterBufferTarget` adapts it).
    return
      "webrtcbin name=webrtc bundle-policy=max-bundle latency=\(fixedJitterBufferMs ?? JitterBufferTarget.startMs) "
      + "\(source) ! audioconvert ! audioresample ! volume name=mic ! valve name=audiohold drop=false ! "
      + "valve name=audiogate drop=true ! "
      + "queue leaky=downstream max-size-buffers=0 max-size-bytes=0 max-size-time=200000000 ! "
      + "opusenc name=aenc audio-type=voice bandwidth=auto bitrate=\(encoderBitrate) "
      + "frame-size=\(AudioProfile.packetTime(nearest: audioProfile.packetTimeMs)) "
      + "inband-fec=\(audioProfile.inbandFEC) ! "
      + "rtpopuspay name=pay pt=\(Self.defaultOpusPayloadType) ssrc=\(ssrc) dtx=true ! "
      + "capsfilter name=rtpcaps caps=\"\(Self.rtpCaps(payloadType: Self.defaultOpusPayloadType, ssrc: ssrc))\" ! webrtc."
      + camera
  }

  /// The profile's bitrate within what Opus encoders take.
  var encoderBitrate: Int {
    min(max(audioProfile.maxAverageBitrate, AudioProfile.bitrates.lowerBound), AudioProfile.bitrates.upperBound)
  }

  static let defaultOpusPayloadType = 111
  /// Where the encoder starts, as browsers do; `VideoRateController` moves it with the receiver's reports.
  static let startVideoBitrate = 300_000
  /// What a connection without a camera receives: both codecs, the preferred one first.
  var receiveCaps: String {
    ([videoCodec] + VideoCodec.allCases.filter { $0 != videoCodec }).map { $0.caps() }.joined(separator: ";")
  }

  /// The SSRCs announced (`a=ssrc:<n> ...`) in the video sections of an SDP.
  static func videoSSRCs(in sdp: String) -> [UInt32] {
    var found: [UInt32] = []
    for section in SDPMediaSection.sections(of: sdp) where section.media == "video" {
      for line in section.lines where line.hasPrefix("a=ssrc:") {
        if let ssrc = UInt32(line.dropFirst("a=ssrc:".count).prefix { $0.isNumber }), !found.contains(ssrc) {
          found.append(ssrc)
        }
      }
    }
    return found
  }

  static func rtpCaps(payloadType: Int, ssrc: UInt32? = nil) -> String {
    // encoding-params=2: SDP must say opus/48000/2 (RFC 7587); Chrome rejects the section otherwise.
    "application/x-rtp,media=audio,encoding-name=OPUS,payload=\(payloadType),clock-rate=48000,encoding-params=(string)2"
      + (ssrc.map { ",ssrc=(uint)\($0)" } ?? "")
  }

  /// The Opus payload type of the first audio section of an SDP (`a=rtpmap:<pt> opus/48000`).
  static func opusPayloadType(in sdp: String) -> Int? {
    SDPMediaSection.first("audio", in: sdp)?.payloadType(of: "opus/48000")
  }
}

/// Decoded remote audio: signed 16-bit little-endian PCM, 48 kHz, mono, with when it came out
/// of the decoder (ns on GStreamer's monotonic system clock, one clock for every connection of
/// the process) and the playout delay the receiver wants now, for a player or a recorder that
/// keeps time (`PlayoutTimeline`).
public struct RemoteAudio: Sendable {
  public var samples: Data
  public var arrived: UInt64
  /// The jitter buffer's latency and the decoder's look-ahead, ns: how much audio a player
  /// should hold so that what the jitter buffer waits for still plays in time.
  public var playoutDelay: UInt64

  public init(samples: Data, arrived: UInt64, playoutDelay: UInt64) {
    self.samples = samples
    self.arrived = arrived
    self.playoutDelay = playoutDelay
  }

  /// Now on the clock `due` and `arrived` are read from (CLOCK_MONOTONIC, as GStreamer's
  /// system clock), ns.
  public static func clockNow() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
  }
}
