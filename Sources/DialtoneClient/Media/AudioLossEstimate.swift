/// What an Opus encoder is told of the loss ahead of it (libopus `OPUS_SET_PACKET_LOSS_PERC`,
/// GStreamer's `packet-loss-percentage`): how much in-band FEC it spends bits on, and how far it
/// leans to the modes that carry it. Fed with each RTCP receiver report's fraction lost about
/// what this side sends (RFC 3550, 6.4.1): the loss on the network, before the receiver's
/// FEC or RED repaired anything.
///
/// Loss that rises is followed at once (the next packets need the protection); loss that falls
/// is followed slowly (about a quarter of the way per report), so a lull between bursts does not
/// drop the protection the next burst needs. libwebrtc does the same for browsers and the Apple
/// adapter inside its own Opus encoder.
public struct AudioLossEstimate: Sendable, Equatable {
  /// The loss the encoder protects against, a fraction.
  public private(set) var smoothed = 0.0
  /// What the encoder is told at most, in percent.
  public static let ceiling = 50
  /// How much of the way towards a lower report each report goes.
  public static let decay = 0.25

  public init() {}

  /// One receiver report's fraction lost (0...1; anything else is ignored). Returns the
  /// percentage to tell the encoder (0...`ceiling`).
  @discardableResult
  public mutating func report(fractionLost: Double) -> Int {
    if fractionLost.isFinite, fractionLost >= 0, fractionLost <= 1 {
      smoothed = fractionLost >= smoothed ? fractionLost : smoothed + (fractionLost - smoothed) * Self.decay
    }
    return percentage
  }

  /// The percentage the encoder is told now: the smoothed loss, rounded up (a little loss still
  /// buys a little protection), at most `ceiling`; 0 below 0.1 %.
  public var percentage: Int {
    guard smoothed >= 0.001 else { return 0 }
    // A hair over a whole percent (binary fractions) stays on it.
    return min(Self.ceiling, Int((smoothed * 100 - 1e-9).rounded(.up)))
  }
}
