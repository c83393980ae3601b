import Foundation

/// One m-section of an SDP: its media kind, port and attribute lines, so code that reads a
/// section (its direction, payload types, SSRCs) does not walk the lines itself.
public struct SDPMediaSection: Sendable, Equatable {
  /// "audio", "video", "application", ...
  public var media: String
  public var port: String
  /// Every line after the `m=` line, up to the next one.
  public var lines: [Substring]

  /// The sections of `sdp`, in order (CRLF, LF or CR line ends).
  public static func sections(of sdp: String) -> [SDPMediaSection] {
    var sections: [SDPMediaSection] = []
    for line in sdp.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }) {
      if line.hasPrefix("m=") {
        let fields = line.dropFirst(2).split(separator: " ")
        sections.append(
          SDPMediaSection(
            media: fields.first.map(String.init) ?? "", port: fields.count > 1 ? String(fields[1]) : "", lines: []))
      } else if !sections.isEmpty {
        sections[sections.count - 1].lines.append(line)
      }
    }
    return sections
  }

  /// The first section of this kind.
  public static func first(_ media: String, in sdp: String) -> SDPMediaSection? {
    sections(of: sdp).first { $0.media == media }
  }

  /// The payload type whose `a=rtpmap` names `encoding` (e.g. "vp8/90000"), case-insensitively.
  public func payloadType(of encoding: String) -> Int? {
    payloadTypes(of: encoding).first
  }

  /// Every payload type whose `a=rtpmap` names `encoding`, in the order of the rtpmap lines.
  public func payloadTypes(of encoding: String) -> [Int] {
    let wanted = " " + encoding.lowercased()
    return lines.filter { $0.hasPrefix("a=rtpmap:") && $0.lowercased().contains(wanted) }
      .compactMap { Int($0.dropFirst("a=rtpmap:".count).prefix { $0.isNumber }) }
  }

  /// The `a=fmtp:<pt>` parameters of a payload type (`key=value` pairs split at `;`), keys
  /// lower-cased; empty when the section has no such line.
  public func formatParameters(of payloadType: Int) -> [String: String] {
    let prefix = "a=fmtp:\(payloadType) "
    guard let line = lines.first(where: { $0.hasPrefix(prefix) }) else { return [:] }
    var parameters: [String: String] = [:]
    for pair in line.dropFirst(prefix.count).split(separator: ";") {
      let parts = pair.split(separator: "=", maxSplits: 1)
      guard parts.count == 2 else { continue }
      let key = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
      if parameters[key] == nil { parameters[key] = parts[1].trimmingCharacters(in: .whitespaces) }
    }
    return parameters
  }
}
