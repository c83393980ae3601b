/// The video sender's target bitrate, following the receiver's RTCP reports: the loss-based
/// controller of Google Congestion Control (draft-ietf-rmcat-gcc-02, section 6) plus a
/// round-trip-time guard for the queue that builds before a narrow link drops anything.
///
/// webrtcbin 1.22 negotiates `transport-cc` but ships no estimator for it (`rtpgccbwe` is in
/// gst-plugins-rs, which Debian 12 does not package), and it neither sends nor reads REMB, so
/// the RTCP receiver reports (fraction lost, round-trip time) are the congestion feedback there
/// is. A pure value: `update` takes one report and returns the new target.
public struct VideoRateController: Sendable, Equatable {
  public struct Report: Sendable, Equatable {
    /// RFC 3550 fraction lost since the previous report, 0...1.
    public var fractionLost: Double
    /// Seconds, from the same report (nil when unknown).
    public var roundTripTime: Double?

    public init(fractionLost: Double, roundTripTime: Double?) {
      self.fractionLost = fractionLost
      self.roundTripTime = roundTripTime
    }
  }

  public let minimum: Int
  public let maximum: Int
  /// Bits per second the encoder is asked for.
  public private(set) var target: Int
  /// The lowest round-trip time seen: the path without a queue.
  public private(set) var baseRoundTripTime: Double?

  public init(start: Int = 600_000, minimum: Int = 100_000, maximum: Int = 1_500_000) {
    self.minimum = minimum
    self.maximum = maximum
    target = min(max(start, minimum), maximum)
  }

  /// GCC's thresholds: above 10 % loss the rate drops by half the loss; under 2 % it grows by
  /// 8 % a report (about a second); in between it holds. A round trip 150 ms over the path's
  /// own means a queue is building: down 15 % before packets are lost.
  public mutating func update(_ report: Report) -> Int {
    let loss = min(max(report.fractionLost, 0), 1)
    var queueing = false
    if let rtt = report.roundTripTime, rtt > 0 {
      baseRoundTripTime = min(baseRoundTripTime ?? rtt, rtt)
      queueing = rtt - (baseRoundTripTime ?? rtt) > 0.15
    }
    var next = Double(target)
    if loss > 0.10 {
      next *= 1 - 0.5 * loss
    } else if queueing {
      next *= 0.85
    } else if loss < 0.02 {
      next *= 1.08
    }
    target = min(max(Int(next), minimum), maximum)
    return target
  }
}
