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
    if let transport = sample.transport {
      // Transport-wide feedback supersedes the reports: it sees every packet.
      transportSeen = true
      guard transport.packetsSent >= 3 else { return nil }
      return update(transport)
    }
    // A second without transport-wide feedback from a peer that sends (or agreed to send) it:
    // nothing to go on, and the reports would only grow the rate into a queue they miss.
    guard !transportSeen, !transportNegotiated else { return nil }
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
