/// Dialtone's audio rules for session descriptions, the same for every engine.
///
/// Each side writes into its own description what it wants to *receive* (RFC 7587, section 7):
/// `useinbandfec`, `usedtx`, `maxaveragebitrate` and `a=ptime` for Opus, and RED (RFC 2198)
/// first where it offers or answers it. Each side's sender then follows the other side's
/// description (`sending(toward:profile:)`). libwebrtc and browsers read those parameters
/// themselves; webrtcbin's sender is configured from them by the GStreamer adapter.
///
/// `local` is applied to a description the engine made, before it is set locally and sent:
/// - every Opus payload type's `a=fmtp` gets the profile's `useinbandfec`, `usedtx` and
///   `maxaveragebitrate` (other parameters, e.g. `minptime`, stay), and the section one
///   `a=ptime`;
/// - a RED payload type is written `red/48000/2` with `a=fmtp:<red> <opus>/<opus>`, as browsers
///   write it (webrtcbin writes `red/48000`, which libwebrtc does not match), and moved first
///   so that the other side sends RED: a sender uses the first codec of the description it
///   received. Without `redundancy` it is removed instead;
/// - `ulpfec` (webrtcbin adds it next to RED; nothing decodes it for audio) and retransmission
///   payload types of anything removed are dropped from audio sections.
/// Sections that are not audio, or rejected (port 0), and descriptions without Opus are left as
/// they are.
public enum AudioSDP {
  public static func local(_ sdp: String, profile: AudioProfile) -> String {
    var description = SDPLines(sdp)
    guard description.sections.contains(where: { $0.isLiveAudio && !$0.opusPayloadTypes.isEmpty }) else { return sdp }
    for index in description.sections.indices where description.sections[index].isLiveAudio {
      description.sections[index].apply(profile)
    }
    return description.text
  }

  /// What the other side's description asks of this side's audio sender, within `profile`;
  /// nil when it has no live audio section with Opus.
  public static func sending(toward remote: String, profile: AudioProfile) -> AudioSendParameters? {
    guard let section = SDPLines(remote).sections.first(where: \.isLiveAudio), let opus = section.opusPayloadTypes.first
    else { return nil }
    let parameters = section.formatParameters(of: opus)
    var packetTime = profile.packetTimeMs
    if let ptime = section.attribute("ptime").flatMap({ Int($0) }) {
      packetTime = AudioProfile.packetTime(nearest: ptime)
    }
    if let maxptime = section.attribute("maxptime").flatMap({ Int($0) }), maxptime < packetTime {
      packetTime = AudioProfile.packetTime(nearest: maxptime)
    }
    var bitrate = min(
      max(profile.maxAverageBitrate, AudioProfile.bitrates.lowerBound), AudioProfile.bitrates.upperBound)
    if let asked = parameters["maxaveragebitrate"].flatMap({ Int($0) }), AudioProfile.bitrates.contains(asked) {
      bitrate = min(bitrate, asked)
    }
    return AudioSendParameters(
      opusPayloadType: opus, inbandFEC: profile.inbandFEC && parameters["useinbandfec"] == "1",
      dtx: profile.dtx && parameters["usedtx"] == "1", bitrate: bitrate, packetTimeMs: packetTime,
      redundancyPayloadType: profile.redundancy ? section.redPayloadTypes.first : nil)
  }

  /// The RED payload type of the first live audio section, if it lists one.
  public static func redundancyPayloadType(in sdp: String) -> Int? {
    SDPLines(sdp).sections.first(where: \.isLiveAudio)?.redPayloadTypes.first
  }
}

/// What this side's Opus encoder does, from the other side's description.
public struct AudioSendParameters: Sendable, Equatable {
  public var opusPayloadType: Int
  /// The other side decodes in-band FEC and the profile wants it.
  public var inbandFEC: Bool
  public var dtx: Bool
  /// Bits per second: the profile's, or less when the other side asks for less.
  public var bitrate: Int
  public var packetTimeMs: Int
  /// RED's payload type when the other side lists it (and the profile wants RED).
  public var redundancyPayloadType: Int?

  public init(
    opusPayloadType: Int, inbandFEC: Bool, dtx: Bool, bitrate: Int, packetTimeMs: Int,
    redundancyPayloadType: Int? = nil
  ) {
    self.opusPayloadType = opusPayloadType
    self.inbandFEC = inbandFEC
    self.dtx = dtx
    self.bitrate = bitrate
    self.packetTimeMs = packetTimeMs
    self.redundancyPayloadType = redundancyPayloadType
  }
}

/// The audio rules on a description's sections (`SDPLines`).
extension SDPLines.Section {
  var isLiveAudio: Bool {
    let f = fields
    return f.count > 3 && f[0] == "audio" && f[1] != "0"
  }

  var formats: [Int] { fields.dropFirst(3).compactMap { Int($0) } }

  /// Payload types whose rtpmap names `encoding` (e.g. "opus"), in m-line order.
  func payloadTypes(named encoding: String) -> [Int] {
    let named = Set(
      lines.compactMap { line -> Int? in
        guard line.hasPrefix("a=rtpmap:") else { return nil }
        let rest = line.dropFirst("a=rtpmap:".count)
        let parts = rest.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, let pt = Int(parts[0]),
          parts[1].split(separator: "/").first?.lowercased() == encoding
        else { return nil }
        return pt
      })
    return formats.filter(named.contains)
  }

  var opusPayloadTypes: [Int] { payloadTypes(named: "opus") }
  var redPayloadTypes: [Int] { payloadTypes(named: "red") }

  func formatParameters(of pt: Int) -> [String: String] {
    guard let line = lines.first(where: { $0.hasPrefix("a=fmtp:\(pt) ") }) else { return [:] }
    var parameters: [String: String] = [:]
    for (key, value) in Self.parameters(line) where parameters[key] == nil { parameters[key] = value }
    return parameters
  }

  /// The `key=value` pairs of an fmtp line, in order, keys lower-cased.
  private static func parameters(_ fmtp: String) -> [(String, String)] {
    guard let space = fmtp.firstIndex(of: " ") else { return [] }
    return fmtp[fmtp.index(after: space)...].split(separator: ";").compactMap { pair in
      let parts = pair.split(separator: "=", maxSplits: 1)
      guard parts.count == 2 else { return nil }
      return (String(parts[0]).trimmed.lowercased(), String(parts[1]).trimmed)
    }
  }

  mutating func apply(_ profile: AudioProfile) {
    let opus = opusPayloadTypes
    guard let primary = opus.first else { return }
    for pt in opus { setOpusParameters(pt, profile) }
    lines.removeAll { $0.hasPrefix("a=ptime:") }
    lines.append("a=ptime:\(AudioProfile.packetTime(nearest: profile.packetTimeMs))")
    var removed = Set(payloadTypes(named: "ulpfec"))
    let red = redPayloadTypes
    if profile.redundancy {
      for pt in red { describeRED(pt, carrying: primary) }
      if let first = red.first { moveFirst(first) }
    } else {
      removed.formUnion(red)
    }
    // Retransmissions of what goes are useless too.
    for pt in payloadTypes(named: "rtx") {
      if let apt = formatParameters(of: pt)["apt"].flatMap({ Int($0) }), removed.contains(apt) { removed.insert(pt) }
    }
    remove(removed)
  }

  private mutating func setOpusParameters(_ pt: Int, _ profile: AudioProfile) {
    let wanted: [(String, String)] = [
      ("useinbandfec", profile.inbandFEC ? "1" : "0"), ("usedtx", profile.dtx ? "1" : "0"),
      ("maxaveragebitrate", String(profile.maxAverageBitrate)),
    ]
    let prefix = "a=fmtp:\(pt) "
    var pairs: [(String, String)] = []
    if let index = lines.firstIndex(where: { $0.hasPrefix(prefix) }) {
      pairs = Self.parameters(lines[index])
      lines.remove(at: index)
    }
    for (key, value) in wanted {
      if let at = pairs.firstIndex(where: { $0.0 == key }) { pairs[at].1 = value } else { pairs.append((key, value)) }
    }
    let line = prefix + pairs.map { "\($0.0)=\($0.1)" }.joined(separator: ";")
    let after = lines.firstIndex { $0.hasPrefix("a=rtpmap:\(pt) ") }.map { $0 + 1 } ?? lines.count
    lines.insert(line, at: after)
  }

  /// `a=rtpmap:<pt> red/48000/2`, and `a=fmtp:<pt> <opus>/<opus>` unless it says already.
  private mutating func describeRED(_ pt: Int, carrying opus: Int) {
    guard let index = lines.firstIndex(where: { $0.hasPrefix("a=rtpmap:\(pt) ") }) else { return }
    lines[index] = "a=rtpmap:\(pt) red/48000/2"
    if !lines.contains(where: { $0.hasPrefix("a=fmtp:\(pt) ") }) {
      lines.insert("a=fmtp:\(pt) \(opus)/\(opus)", at: index + 1)
    }
  }

  private mutating func moveFirst(_ pt: Int) {
    var f = fields
    guard f.count > 3 else { return }
    let moved = [String(pt)] + f[3...].filter { $0 != String(pt) }
    f.replaceSubrange(3..., with: moved)
    mLine = "m=" + f.joined(separator: " ")
  }

  private mutating func remove(_ pts: Set<Int>) {
    guard !pts.isEmpty else { return }
    var f = fields
    let kept = f[3...].filter { Int($0).map { !pts.contains($0) } ?? true }
    // A section must keep one format: were everything removed, leave it as it was.
    guard !kept.isEmpty else { return }
    f.replaceSubrange(3..., with: kept)
    mLine = "m=" + f.joined(separator: " ")
    lines.removeAll { line in
      for kind in ["a=rtpmap:", "a=fmtp:", "a=rtcp-fb:"] where line.hasPrefix(kind) {
        let rest = line.dropFirst(kind.count)
        if let pt = Int(rest.prefix { $0.isNumber }), pts.contains(pt), rest.dropFirst(String(pt).count).first == " " {
          return true
        }
      }
      return false
    }
  }
}
