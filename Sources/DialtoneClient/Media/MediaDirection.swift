/// The direction of an SDP media section (RFC 8866 6.7, RFC 3264 6), from the side that wrote it.
public enum MediaDirection: String, Sendable, Equatable, CaseIterable {
  case sendrecv, sendonly, recvonly, inactive

  public init(sends: Bool, receives: Bool) {
    switch (sends, receives) {
    case (true, true): self = .sendrecv
    case (true, false): self = .sendonly
    case (false, true): self = .recvonly
    case (false, false): self = .inactive
    }
  }

  public var sends: Bool { self == .sendrecv || self == .sendonly }
  public var receives: Bool { self == .sendrecv || self == .recvonly }

  /// The direction of the first video section of `sdp`, as its writer states it: nil without
  /// one; no direction attribute means sendrecv; a rejected section (port 0, unless it is
  /// `bundle-only`, RFC 8843 7.5) is inactive.
  public static func video(in sdp: String) -> MediaDirection? {
    var inVideo = false
    var found: MediaDirection?
    var portZero = false
    var bundleOnly = false
    for line in sdp.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) {
      if line.hasPrefix("m=") {
        if inVideo { break }
        inVideo = line.hasPrefix("m=video")
        if inVideo {
          let fields = line.split(separator: " ")
          portZero = fields.count > 1 && fields[1] == "0"
          found = .sendrecv
        }
      } else if inVideo, line.hasPrefix("a=") {
        let attribute = line.dropFirst(2)
        if attribute == "bundle-only" { bundleOnly = true }
        if let direction = MediaDirection(rawValue: String(attribute)) { found = direction }
      }
    }
    return portZero && !bundleOnly && found != nil ? .inactive : found
  }
}
