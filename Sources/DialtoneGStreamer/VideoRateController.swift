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

  /// What the sender's stack shows once a second: the receiver's latest report (repeated until
  /// the next one comes) and the running counts of NACKs received and video packets sent.
  public struct Sample: Sendable, Equatable {
    /// The latest report's fraction lost, nil before the first one.
    public var fractionLost: Double?
    public var roundTripTime: Double?
    /// The report's cumulative packets lost: with the two above, it tells a new report from
    /// the previous one repeated.
    public var cumulativeLost: Int64
    public var nacksReceived: UInt64
    public var packetsSent: UInt64

    public init(
      fractionLost: Double?, roundTripTime: Double?, cumulativeLost: Int64, nacksReceived: UInt64,
      packetsSent: UInt64
    ) {
      self.fractionLost = fractionLost
      self.roundTripTime = roundTripTime
      self.cumulativeLost = cumulativeLost
      self.nacksReceived = nacksReceived
      self.packetsSent = packetsSent
    }
  }

  public let minimum: Int
  public let maximum: Int
  /// Bits per second the encoder is asked for.
  public private(set) var target: Int
  /// The lowest round-trip time seen: the path without a queue.
  public private(set) var baseRoundTripTime: Double?

  /// No congestion seen yet: a clean link grows the rate faster (browsers probe their way up
  /// from 300 kbit/s within seconds; 8 % a second would take ten to double it).
  public private(set) var probing = true
  private var lastReport: Report?
  private var lastCumulativeLost: Int64?
  private var lastNacks: UInt64?
  private var lastPackets: UInt64?

  public init(start: Int = 600_000, minimum: Int = 100_000, maximum: Int = 1_500_000) {
    self.minimum = minimum
    self.maximum = maximum
    target = min(max(start, minimum), maximum)
  }

  /// One sample: a new report is used once (with the NACK rate if that is worse); between
  /// reports the NACKs sent for the packets since the previous sample (AVPF feedback comes at
  /// once, regular reports every second or more, and webrtcbin 1.22 exposes them only now and
  /// then) stand for the loss. Nil: nothing new.
  public mutating func observe(_ sample: Sample) -> Int? {
    var nackLoss: Double?
    if let nacks = lastNacks, let packets = lastPackets, sample.packetsSent >= packets, sample.nacksReceived >= nacks {
      let sent = sample.packetsSent - packets
      // A NACK names one or more lost packets (RFC 4585 6.2.1: a packet id and a bitmask of
      // the 16 after it), so NACKs per packet sent undercount the loss: counted double.
      if sent >= 20 { nackLoss = min(1, 2 * Double(sample.nacksReceived - nacks) / Double(sent)) }
    }
    lastNacks = sample.nacksReceived
    lastPackets = sample.packetsSent
    var report: Report?
    if let lost = sample.fractionLost {
      let candidate = Report(fractionLost: lost, roundTripTime: sample.roundTripTime)
      if candidate != lastReport || sample.cumulativeLost != lastCumulativeLost { report = candidate }
      lastReport = candidate
      lastCumulativeLost = sample.cumulativeLost
    }
    if var report {
      report.fractionLost = max(report.fractionLost, nackLoss ?? 0)
      return update(report)
    }
    // A few NACKs come from late (reordered, jittered) packets too: between reports they only
    // count as congestion above GCC's 10 %; below it they do not hold the rate back.
    guard let nackLoss else { return nil }
    return update(Report(fractionLost: nackLoss > 0.10 ? nackLoss : 0, roundTripTime: nil))
  }

  /// GCC's thresholds: above 10 % loss the rate drops by half the loss; under 2 % it grows by
  /// 8 % a report (about a second), 25 % until the first congestion; in between it holds. A round trip 150 ms over the path's
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
      probing = false
    } else if queueing {
      next *= 0.85
      probing = false
    } else if loss < 0.02 {
      next *= probing ? 1.25 : 1.08
    }
    target = min(max(Int(next), minimum), maximum)
    return target
  }
}
