import DialtoneClient

/// The video codecs the engine sends and receives, with the Debian 12 elements behind each:
/// VP8 through libvpx (`vp8enc`/`vp8dec`, gst-plugins-good) and H.264 through OpenH264
/// (`openh264enc`/`openh264dec`, gst-plugins-bad), constrained baseline in packetization
/// mode 1, the profile every WebRTC endpoint decodes (RFC 7742).
public enum VideoCodec: String, Sendable, CaseIterable {
  case vp8
  case h264

  var encodingName: String { self == .vp8 ? "VP8" : "H264" }

  /// Chromium's numbers; an offer's own replace them.
  var defaultPayloadType: Int { self == .vp8 ? 96 : 102 }

  /// The encoder property that takes bits per second.
  var bitrateProperty: String { self == .vp8 ? "target-bitrate" : "bitrate" }

  /// The RTP header extension of transport-wide congestion control: every packet carries a
  /// sequence number across streams, and the receiver reports when each arrived (RTCP
  /// transport-cc), which is the congestion feedback `VideoRateController` follows.
  static let transportWideCC = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
  /// Chromium's id for it; an offer's own replaces it.
  static let defaultTransportWideCCID = 3

  /// webrtcbin caps for this codec (an offer's `m=` line, `a=fmtp` and `a=extmap` come from
  /// them; the payloader adds the extensions they name).
  func caps(payloadType: Int? = nil, ssrc: UInt32? = nil, transportWideCCID: Int? = defaultTransportWideCCID) -> String
  {
    var caps =
      "application/x-rtp,media=video,encoding-name=\(encodingName),payload=\(payloadType ?? defaultPayloadType),"
      + "clock-rate=90000"
    if self == .h264 {
      caps += ",packetization-mode=(string)1,profile-level-id=(string)42e01f,level-asymmetry-allowed=(string)1"
    }
    return caps + Self.extensions(transportWideCCID) + (ssrc.map { ",ssrc=(uint)\($0)" } ?? "")
  }

  /// Caps for answering an offer at `payloadType`, with the offer's transport-wide CC id (nil:
  /// the offer has none). No profile, so webrtcbin keeps the offer's `profile-level-id` (any
  /// constrained-baseline or baseline level, see `payloadType(in:)`).
  func answerCaps(payloadType: Int, ssrc: UInt32? = nil, transportWideCCID: Int?) -> String {
    guard self == .h264 else { return caps(payloadType: payloadType, ssrc: ssrc, transportWideCCID: transportWideCCID) }
    return "application/x-rtp,media=video,encoding-name=H264,payload=\(payloadType),clock-rate=90000,"
      + "packetization-mode=(string)1" + Self.extensions(transportWideCCID) + (ssrc.map { ",ssrc=(uint)\($0)" } ?? "")
  }

  private static func extensions(_ transportWideCCID: Int?) -> String {
    transportWideCCID.map { ",extmap-\($0)=(string)\(transportWideCC)" } ?? ""
  }

  /// The id an SDP gives the transport-wide CC extension (`a=extmap:<id> <uri>`, in the
  /// video section or at session level).
  static func transportWideCCID(in sdp: String) -> Int? {
    for line in sdp.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" })
    where line.hasPrefix("a=extmap:") && line.hasSuffix(" " + transportWideCC) {
      if let id = Int(line.dropFirst("a=extmap:".count).prefix { $0.isNumber }) { return id }
    }
    return nil
  }

  /// The encoder and payloader, as one bin between the camera's valve and webrtcbin.
  ///
  /// Both are set for a live call: a keyframe at least every 2 s, a bitrate target that
  /// `VideoRateController` moves, frames dropped rather than the target missed.
  /// - VP8: the fastest preset on one thread (libvpx's threads wait for each other spinning:
  ///   with two, 86 % of a softphone's CPU went to two spin loops, and a 2-core machine with two
  ///   softphones fell to 13–17 fps), error resilient, constant bitrate over a 1 s buffer (VBR
  ///   overshoots a low target several times over on a busy picture), internal downscaling,
  ///   and keyframes of at most 3 average frames (a bigger burst overflows a narrow link's queue).
  /// - H.264: OpenH264's camera mode at low complexity, SPS and PPS before every IDR frame (a
  ///   receiver that lost them decodes from the next keyframe), single NAL units or FU-A.
  func encoder(framerate: Int, bitrate: Int, payloadType: Int, ssrc: UInt32) -> String {
    switch self {
    case .vp8:
      return "vp8enc name=venc deadline=1 cpu-used=8 threads=1 target-bitrate=\(bitrate) end-usage=cbr "
        + "buffer-size=1000 buffer-initial-size=500 buffer-optimal-size=600 dropframe-threshold=30 "
        + "resize-allowed=true max-intra-bitrate=300 keyframe-max-dist=\(framerate * 2) error-resilient=partitions ! "
        + "rtpvp8pay name=vpay pt=\(payloadType) ssrc=\(ssrc) picture-id-mode=15-bit"
    case .h264:
      return "openh264enc name=venc usage-type=camera rate-control=bitrate complexity=low multi-thread=1 "
        + "bitrate=\(bitrate) gop-size=\(framerate * 2) enable-frame-skip=true ! "
        + "rtph264pay name=vpay pt=\(payloadType) ssrc=\(ssrc) config-interval=-1 aggregate-mode=zero-latency"
    }
  }

  /// This codec's payload type in an SDP video section, if the section offers it in a form
  /// the engine decodes and sends: for H.264, packetization mode 1 and a baseline profile,
  /// constrained baseline (`42e0..`, `42c0..`) first.
  func payloadType(in section: SDPMediaSection) -> Int? {
    let payloadTypes = section.payloadTypes(of: "\(encodingName.lowercased())/90000")
    guard self == .h264 else { return payloadTypes.first }
    let usable = payloadTypes.compactMap { pt -> (Int, Bool)? in
      let parameters = section.formatParameters(of: pt)
      guard parameters["packetization-mode"] == "1", let profile = parameters["profile-level-id"]?.lowercased(),
        profile.count == 6, profile.hasPrefix("42")
      else { return nil }
      let constraints = UInt8(profile.dropFirst(2).prefix(2), radix: 16) ?? 0
      return (pt, constraints & 0x40 != 0)  // constraint_set1: constrained baseline
    }
    return (usable.first { $0.1 } ?? usable.first)?.0
  }

  /// The codec an answer's first video section settles on: its first one the engine has. An
  /// answer picks from our offer, so its parameters need no check (webrtcbin's own answers
  /// leave `profile-level-id` out).
  static func answered(in answer: String) -> VideoCodec? {
    guard let section = SDPMediaSection.first("video", in: answer) else { return nil }
    for line in section.lines where line.hasPrefix("a=rtpmap:") {
      let encoding = line.split(separator: " ").dropFirst().first?.lowercased() ?? ""
      if let codec = allCases.first(where: { encoding == "\($0.encodingName.lowercased())/90000" }) { return codec }
    }
    return nil
  }

  /// What to send in answer to `offer`'s first video section: `preferred` if it is offered,
  /// else the other codec, else nil (the section carries no codec the engine has).
  static func choice(in offer: String, preferring preferred: VideoCodec) -> (codec: VideoCodec, payloadType: Int)? {
    guard let section = SDPMediaSection.first("video", in: offer) else { return nil }
    for codec in [preferred] + allCases.filter({ $0 != preferred }) {
      if let pt = codec.payloadType(in: section) { return (codec, pt) }
    }
    return nil
  }
}
