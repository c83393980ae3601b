/// The single subscriber connection of a device in a Janus group call (docs/protocol.md 20.9):
/// one receive-only connection whose offer grows and shrinks as participants come and go,
/// instead of one connection per participant. A device asks for it with `multistream` in its
/// `group-create`, `group-join` or `room-join`; the server grants it in `group-media`.
public enum GroupSubscription {
  /// The stream id of the subscriber connection in `group-offer`, `group-answer`,
  /// `group-candidate` and `group-end-of-candidates`.
  public static let stream = "subscriber"
}

/// How one of a device's group streams restarts (protocol.md 20.10): `ice` restarts ICE on
/// the stream's existing connection (new ICE credentials, the same DTLS session); `connection`
/// replaces the connection with a fresh one (an engine that cannot restart ICE in place, like
/// webrtcbin 1.22).
public enum GroupRestart: String, WireEnum {
  case ice
  case connection
}

/// What one m-section of a subscriber offer carries.
public enum GroupMediaKind: String, WireEnum {
  case audio
  case video
}

/// One live m-section of the subscriber connection: `mid` carries `from`'s `kind` of media.
/// Sections the offer has that no entry names are inactive (their participant left): they may
/// carry someone else later, under the same `mid`.
public struct GroupStreamSection: WireCodable, Hashable {
  public var mid: String
  public var kind: GroupMediaKind
  public var from: Peer

  public init(mid: String, kind: GroupMediaKind, from: Peer) {
    self.mid = mid
    self.kind = kind
    self.from = from
  }

  public init(wirePlaceholder _: WirePlaceholder) {
    self.init(mid: "", kind: .audio, from: Peer(userId: "", deviceId: ""))
  }

  public mutating func wire<Coder: WireCoder>(_ c: inout Coder) throws(Coder.Failure) {
    try c.object("from", &from)
    try c.enumeration("kind", &kind)
    try c.string("mid", &mid, .mid)
  }
}

extension WireText {
  /// `mid` of a subscriber section (1...32: RFC 8843 recommends at most 16 characters).
  public static let mid = WireText(maxBytes: Limits.maxMidBytes)
}

extension Limits {
  /// `streams[].mid` of a subscriber `group-offer` (1...32).
  public static let maxMidBytes = 32
}
