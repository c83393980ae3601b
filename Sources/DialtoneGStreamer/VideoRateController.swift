/// The video sender's target bitrate, following the receiver's feedback with the rules of
/// Google Congestion Control (draft-ietf-rmcat-gcc-02).
///
/// The feedback is transport-wide congestion control (RTCP transport-cc, draft-holmer-rmcat-
/// transport-wide-cc-extensions-01) when the peer sends it: Chromium and webrtcbin 1.22 do, and
/// webrtcbin's rtpsession sums it up as loss, sent and received bitrates and the mean delay
/// gradient over its latest window. webrtcbin ships no estimator of its own (`rtpgccbwe` is in
/// gst-plugins-rs, which Debian 12 does not package). A peer without it (aiortc) leaves the
/// RTCP receiver reports (fraction lost, round-trip time) and the NACKs, which under a full
/// queue both ways say little: webrtcbin's reports showed 0 % loss while the link dropped
/// 60 % (docs/benchmarks.md). A pure value: each `observe` takes one sample, returns the new target.
///
/// **Feedback timeout.** Feedback that stops while the sender keeps sending video is itself the
/// news: the return path is saturated, or the receiver is gone (it hung up, its media stopped).
/// Holding the last target then floods the link at full rate; on a 200–300 kbit/s link that
/// flood kept the other side's new signaling connection from completing for seconds after it
/// hung up. So, as libwebrtc's sender lowers its estimate while its packets go unanswered (its
/// RTT backoff: 20 % a second once the feedback is ~3 s late, and not while nothing is sent),
/// a sample in which video packets left but no feedback came counts as silent, and past a grace
/// each further silent sample cuts the target by 20 %, down to `minimum`:
/// - with transport-wide feedback (negotiated or seen) the feedback is any new window; it comes
///   every ~100 ms, so a one-second sample without one is already ten missed, and the grace is
///   2 samples: the cuts start with the third silent second, where libwebrtc's do;
/// - with receiver reports it is a new report or new NACKs; reports come about every second,
///   randomised over 0.5–1.5 s, and webrtcbin 1.22 shows them only now and then, so the grace
///   is 4 samples: the cuts start with the fifth silent second, three intervals late even at
///   the slowest. Beyond one silent second "no NACKs" no longer counts as a clean second
///   either: a receiver that is gone sends none (that rule grew the rate 8–25 % a second).
/// A sample in which no video packet left (muted, nothing to send) is no silence and starts the
/// count again: the receiver had nothing to answer. Nor is anything silence before the first
/// feedback (a call's start over a full link). When feedback returns the normal rules resume
/// from the lowered target, with congestion seen (8 % a step, not 25 %) and, with transport-wide
/// feedback, growth clamped by the received rate: no burst straight back to the old rate.
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

  /// rtpsession's summary of the latest transport-wide feedback window (repeated until the next).
  public struct TransportFeedback: Sendable, Equatable {
    /// Of the window's packets, 0...1: the path's loss, before any retransmission.
    public var fractionLost: Double
    /// Bits per second sent and received over the window.
    public var bitrateSent: Double
    public var bitrateReceived: Double
    public var packetsSent: Int
    /// The mean change of the inter-arrival delay over the window, seconds: > 0, a queue builds.
    public var delayGradient: Double

    public init(
      fractionLost: Double, bitrateSent: Double, bitrateReceived: Double, packetsSent: Int, delayGradient: Double
    ) {
      self.fractionLost = fractionLost
      self.bitrateSent = bitrateSent
      self.bitrateReceived = bitrateReceived
      self.packetsSent = packetsSent
      self.delayGradient = delayGradient
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
    /// The latest transport-wide feedback, nil while the peer sent none.
    public var transport: TransportFeedback?

    public init(
      fractionLost: Double?, roundTripTime: Double?, cumulativeLost: Int64, nacksReceived: UInt64,
      packetsSent: UInt64, transport: TransportFeedback? = nil
    ) {
      self.fractionLost = fractionLost
      self.roundTripTime = roundTripTime
      self.cumulativeLost = cumulativeLost
      self.nacksReceived = nacksReceived
      self.packetsSent = packetsSent
      self.transport = transport
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
  private var transportSeen = false
  /// The descriptions agreed on transport-wide feedback (`a=extmap` of the transport-cc
  /// extension): the receiver reports are not used, even before the first feedback.
  public var transportNegotiated = false
  private var lastReport: Report?
  private var lastCumulativeLost: Int64?
  private var lastNacks: UInt64?
  private var lastPackets: UInt64?
  /// The video packets sent by the previous sample, in either mode: growth means sending.
  private var lastSent: UInt64?
  private var feedbackHeard = false
  /// Samples in a row in which video was sent and no feedback came (see the feedback timeout).
  public private(set) var silentSamples = 0

  /// Silent samples held before the cuts begin, with transport-wide feedback and with reports.
  public static let transportGrace = 2
  public static let reportGrace = 4
  /// Each silent sample past the grace multiplies the target by this.
  public static let timeoutFactor = 0.8

  public init(start: Int = 600_000, minimum: Int = 100_000, maximum: Int = 1_500_000) {
    self.minimum = minimum
    self.maximum = maximum
    target = min(max(start, minimum), maximum)
  }

  /// One sample: a new report is used once (with the NACK rate if that is worse); between
  /// reports the NACKs sent for the packets since the previous sample (AVPF feedback comes at
  /// once, regular reports every second or more, and webrtcbin 1.22 exposes them only now and
  /// then) stand for the loss. Samples that sent video and heard nothing past the grace cut the
  /// target (the feedback timeout above). Nil: nothing new.
  public mutating func observe(_ sample: Sample) -> Int? {
    // Counters that go backwards (a fresh connection) are a new start, not packets sent.
    let sending = lastSent.map { sample.packetsSent > $0 } ?? false
    lastSent = sample.packetsSent
    if let transport = sample.transport {
      // Transport-wide feedback supersedes the reports: it sees every packet.
      transportSeen = true
      heard()
      guard transport.packetsSent >= 3 else { return nil }
      return update(transport)
    }
    // A second without transport-wide feedback from a peer that sends (or agreed to send) it:
    // nothing to go on, and the reports would only grow the rate into a queue they miss; past
    // the grace, the silence itself lowers the rate.
    guard !transportSeen, !transportNegotiated else { return silent(sending: sending, grace: Self.transportGrace) }
    var nackLoss: Double?
    var nacksCame = false
    if let nacks = lastNacks, let packets = lastPackets, sample.packetsSent >= packets, sample.nacksReceived >= nacks {
      let sent = sample.packetsSent - packets
      nacksCame = sample.nacksReceived > nacks
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
    if report != nil || nacksCame {
      heard()
    } else if let cut = silent(sending: sending, grace: Self.reportGrace) {
      return cut
    }
    if var report {
      report.fractionLost = max(report.fractionLost, nackLoss ?? 0)
      return update(report)
    }
    // A few NACKs come from late (reordered, jittered) packets too: between reports they only
    // count as congestion above GCC's 10 %; below it they do not hold the rate back. No NACKs
    // count as a clean second only within a second of the last feedback.
    guard let nackLoss, silentSamples <= 1 else { return nil }
    return update(Report(fractionLost: nackLoss > 0.10 ? nackLoss : 0, roundTripTime: nil))
  }

  private mutating func heard() {
    feedbackHeard = true
    silentSamples = 0
  }

  /// A sample without feedback: counted if video was sent (else the count starts again), and
  /// past the grace the target is cut. Nil while held.
  private mutating func silent(sending: Bool, grace: Int) -> Int? {
    guard feedbackHeard, sending else {
      silentSamples = 0
      return nil
    }
    silentSamples += 1
    guard silentSamples > grace else { return nil }
    probing = false
    target = min(max(Int(Double(target) * Self.timeoutFactor), minimum), maximum)
    return target
  }

  /// One second of transport-wide feedback. GCC's loss rules (above 10 % down by half the
  /// loss, under 2 % up), with its delay-based bounds on the rate that gets through: on loss or
  /// a growing queue (a delay gradient over 10 ms) at most 85 % of the received bitrate, and
  /// growth only up to 1.5 times it plus 10 kbit/s, as libwebrtc's AIMD control clamps it. The
  /// clamp holds for an encoder under its target too (a still picture): a target grown past what
  /// was ever carried is a burst into a full queue the moment the picture moves (both sides'
  /// busy video at 300 kbit/s reached 730 kbit/s that way, and the receiver froze).
  public mutating func update(_ feedback: TransportFeedback) -> Int {
    let loss = min(max(feedback.fractionLost, 0), 1)
    // A received bitrate from a few packets is mostly burst: it bounds the rate only from ten.
    let received = feedback.bitrateReceived > 0 && feedback.packetsSent >= 10 ? feedback.bitrateReceived : nil
    var next = Double(target)
    if loss > 0.10 {
      next = min(next * (1 - 0.5 * loss), received.map { 0.85 * $0 } ?? next)
      probing = false
    } else if feedback.delayGradient > 0.010 {
      next = min(next * 0.85, received.map { 0.85 * $0 } ?? next)
      probing = false
    } else if loss < 0.02 {
      next *= probing ? 1.25 : 1.08
      if let received { next = min(next, max(Double(target), 1.5 * received + 10_000)) }
    }
    target = min(max(Int(next), minimum), maximum)
    return target
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

/// rtpsession's transport-wide windows are short (a feedback packet or two, ~100 ms): they are
/// read several times a second and summed here, weighted by their packets, into one per
/// controller step. A window read twice (no new feedback came) counts once.
public struct TransportFeedbackTally: Sendable, Equatable {
  private var last: VideoRateController.TransportFeedback?
  private var packets = 0
  private var lost = 0.0
  private var sent = 0.0
  private var received = 0.0
  private var gradient = 0.0

  public init() {}

  public mutating func add(_ window: VideoRateController.TransportFeedback) {
    guard window != last else { return }
    last = window
    let n = Double(max(window.packetsSent, 1))
    packets += max(window.packetsSent, 1)
    lost += window.fractionLost * n
    sent += window.bitrateSent * n
    received += window.bitrateReceived * n
    gradient += window.delayGradient * n
  }

  /// The windows since the last `take`, as one; nil if none came.
  public mutating func take() -> VideoRateController.TransportFeedback? {
    guard packets > 0 else { return nil }
    let n = Double(packets)
    defer { self = TransportFeedbackTally(last: last) }
    return .init(
      fractionLost: lost / n, bitrateSent: sent / n, bitrateReceived: received / n, packetsSent: packets,
      delayGradient: gradient / n)
  }

  private init(last: VideoRateController.TransportFeedback?) { self.last = last }
}
