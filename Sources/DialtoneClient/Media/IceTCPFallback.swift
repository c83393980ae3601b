import DialtoneProtocol

/// Keeps ICE-TCP (RFC 6544) out of a connection while UDP may still work: media over TCP turns
/// every lost packet into a stall of the whole stream behind it, so a TCP pair is only worth
/// having when no UDP pair connects. ICE alone does not guarantee that: on a lossy path a TCP
/// check can succeed before the UDP ones (their requests and answers are lost, TCP's are
/// retransmitted), and an agent that nominates the first pair that works stays on it
/// (docs/benchmarks.md: 1 of 3 webrtcbin calls at 20 % loss).
///
/// Both ways: this side's TCP candidates are not sent and the other side's are not added until
/// `delay` has passed since checks could start — a candidate of this side and one of the other
/// side's seen — without the connection coming up over UDP; then every held candidate is released
/// at once, and later ones pass. (Counting from the first candidate of either kind released TCP
/// before a slow answer even arrived, and a TCP pair then won on a clean link.) Once connected
/// first, held ones are dropped: the connection never needs them (a network change replaces it).
/// UDP candidates, including relayed ones over a TURN server reached by TCP or TLS (their
/// transport field says UDP), always pass. Times are offsets from any fixed origin.
public struct IceTCPFallback: Sendable, Equatable {
  public enum State: Sendable, Equatable {
    /// Checks cannot run yet: no candidate of this side, or none of the other side's, seen.
    case idle
    /// TCP candidates held until this time.
    case holding(until: Duration)
    /// Connected without TCP: TCP candidates are dropped.
    case connected
    /// The fallback was taken: everything passes.
    case released
  }

  public let delay: Duration
  public private(set) var state = State.idle
  public private(set) var heldLocal: [IceCandidate] = []
  public private(set) var heldRemote: [IceCandidate] = []
  private var sawLocal = false
  private var sawRemote = false

  /// 3 s: UDP checks on a path losing 20 % of packets each way connect within about a second
  /// (their retransmissions start 100 ms apart), and a network without UDP waits that long.
  public init(delay: Duration = .seconds(3)) {
    self.delay = delay
  }

  /// A local candidate: returned when it may be sent now, nil when held or dropped.
  public mutating func local(_ candidate: IceCandidate, at now: Duration) -> IceCandidate? {
    sawLocal = true
    return admit(candidate, at: now, into: \.heldLocal)
  }

  /// A remote candidate: returned when it may be added now, nil when held or dropped.
  public mutating func remote(_ candidate: IceCandidate, at now: Duration) -> IceCandidate? {
    sawRemote = true
    return admit(candidate, at: now, into: \.heldRemote)
  }

  /// The other side's description carried candidates of its own (it does not trickle them).
  public mutating func remoteDescriptionHadCandidates(at now: Duration) {
    sawRemote = true
    startHolding(at: now)
  }

  /// ICE connected (over UDP: no TCP candidate was let through yet, or it was released).
  public mutating func connected() {
    if case .released = state { return }
    state = .connected
    heldLocal = []
    heldRemote = []
  }

  /// When `release(at:)` should be called next, if candidates are held.
  public var deadline: Duration? {
    if case .holding(let until) = state { return until }
    return nil
  }

  /// Past the deadline without a connection: every held candidate, to be sent and added now.
  public mutating func release(at now: Duration) -> (local: [IceCandidate], remote: [IceCandidate]) {
    guard case .holding(let until) = state, now >= until else { return ([], []) }
    state = .released
    defer {
      heldLocal = []
      heldRemote = []
    }
    return (heldLocal, heldRemote)
  }

  /// Whether a candidate line's transport is TCP (`candidate:<f> <c> <transport> ...`).
  public static func isTCP(_ candidate: IceCandidate) -> Bool {
    let line = candidate.candidate.hasPrefix("a=") ? candidate.candidate.dropFirst(2) : Substring(candidate.candidate)
    let fields = line.split(separator: " ", maxSplits: 3)
    return fields.count > 2 && fields[2].lowercased() == "tcp"
  }

  private mutating func admit(
    _ candidate: IceCandidate, at now: Duration, into held: WritableKeyPath<IceTCPFallback, [IceCandidate]>
  ) -> IceCandidate? {
    startHolding(at: now)
    guard Self.isTCP(candidate) else { return candidate }
    switch state {
    case .idle, .holding:
      // Bounded: one connection gathers a handful of TCP candidates per interface.
      if self[keyPath: held].count < 64 { self[keyPath: held].append(candidate) }
      return nil
    case .connected:
      return nil
    case .released:
      return candidate
    }
  }

  /// The clock starts once both sides have a candidate: only then can a UDP check succeed.
  private mutating func startHolding(at now: Duration) {
    if case .idle = state, sawLocal, sawRemote { state = .holding(until: now + delay) }
  }
}
