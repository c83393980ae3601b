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
    guard let section = SDPMediaSection.first("video", in: sdp) else { return nil }
    let attributes = section.lines.filter { $0.hasPrefix("a=") }.map { $0.dropFirst(2) }
    if section.port == "0", !attributes.contains("bundle-only") { return .inactive }
    return attributes.lazy.compactMap { MediaDirection(rawValue: String($0)) }.last ?? .sendrecv
  }
}
