/// A mean opinion score for the speech a device received, estimated from what it measured of
/// the call: ITU-T G.107's E-model (the transmission rating R, then MOS), with the impairment
/// factors of Dialtone's codec and loss protection chosen by hand near the PESQ-WB that
/// `make bench-quality` measured per condition (docs/benchmarks.md puts the calls' estimates
/// beside their measured scores). An estimate for dashboards and trends, not a listening test.
///
///     R = 93.2 − Id(Ta) − Ie,eff
///     Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl / BurstR + Bpl) (G.107 7-29)
///     Id(Ta) = 0.024 Ta + 0.11 (Ta − 177.3) H(Ta − 177.3) (the usual reduction of G.107's Idd)
///     MOS = 1 + 0.035 R + 7·10⁻⁶ R (R − 60)(100 − R)     (G.107 annex B)
///
/// - 93.2 is G.107's default R0 − Is (no noise, no echo: WebRTC cancels it) with A = 0.
/// - Ppl is the received packets' loss in percent as the network lost them, plus the packets
///   that came too late to play; what FEC and RED repair is the robustness factor Bpl's job.
/// - BurstR, G.107's burst ratio: the loss's mean burst length over the one random loss of
///   that rate would give (1 when a device cannot tell: browsers do not report it).
/// - Ta, the one-way mouth-to-ear delay: half the round trip, the playout buffer (taken as 2.5
///   times the RFC 3550 interarrival jitter, at least 20 ms) and 45 ms of codec, packetisation and
///   FEC look-ahead. Listening scores such as PESQ do not hear delay; Id is what the estimate
///   adds for conversation, and stays under 0.2 MOS below 150 ms RTT.
public enum SpeechQualityEstimate {
  /// How the received audio repairs lost packets.
  public enum Protection: String, Sendable, Equatable, CaseIterable {
    /// Opus with in-band FEC: a lost packet comes back coarse from the next one.
    case fec
    /// RED with FEC: a lost packet comes back whole from a later one, or coarse from the next.
    case redundancy
  }

  /// Opus speech at 32 kbit/s with nothing lost, on G.107's narrowband rating scale (fitted with
  /// RED's Bpl to the CLI's recordings of `make bench-quality`: bench/quality_mos_fit.py).
  public static let codecImpairment = 9.0

  /// Bpl per protection: RED's fitted with Ie (56 recordings, clean to 20 % random and 15 %
  /// bursty loss, RMS error 0.41 PESQ); FEC alone was not measured again and keeps its value.
  public static func robustness(_ protection: Protection) -> Double {
    switch protection {
    case .fec: return 12
    case .redundancy: return 21.5
    }
  }

  /// Beyond this a burst ratio is taken as this (a link that drops everything for seconds).
  public static let maximumBurstRatio = 10.0

  /// The score for these figures (1...4.5); a figure the device did not measure counts as none.
  public static func mos(
    lossPercent: Double?, jitterMs: Double?, rttMs: Double?, protection: Protection, burstRatio: Double? = nil
  ) -> Double {
    mos(
      rating: rating(
        lossPercent: lossPercent, jitterMs: jitterMs, rttMs: rttMs, protection: protection, burstRatio: burstRatio))
  }

  /// The transmission rating R (0...93.2).
  public static func rating(
    lossPercent: Double?, jitterMs: Double?, rttMs: Double?, protection: Protection, burstRatio: Double? = nil
  ) -> Double {
    let loss = finite(lossPercent, in: 0...100)
    let burst = max(1, finite(burstRatio, in: 1...maximumBurstRatio))
    let jitter = finite(jitterMs, in: 0...10_000)
    let rtt = finite(rttMs, in: 0...60_000)
    let oneWay = rtt / 2 + max(20, 2.5 * jitter) + 45
    let delay = 0.024 * oneWay + (oneWay > 177.3 ? 0.11 * (oneWay - 177.3) : 0)
    let ie = codecImpairment
    let effective = ie + (95 - ie) * loss / (loss / burst + robustness(protection))
    return min(93.2, max(0, 93.2 - delay - effective))
  }

  /// G.107 annex B's mapping from R to MOS.
  public static func mos(rating r: Double) -> Double {
    guard r.isFinite, r > 0 else { return 1 }
    guard r < 100 else { return 4.5 }
    return 1 + 0.035 * r + 7e-6 * r * (r - 60) * (100 - r)
  }

  private static func finite(_ value: Double?, in range: ClosedRange<Double>) -> Double {
    guard let value, value.isFinite else { return 0 }
    return min(range.upperBound, max(range.lowerBound, value))
  }
}
