import DialtoneProtocol
import Foundation

/// What one call's quality report says (protocol.md 7.19), gathered as the call goes: the set-up
/// milestones in ms since the call's start here (dial, or the invite's arrival), the ICE
/// restarts, and the connection's statistics. A value: `CallEngine` feeds it states and stats,
/// an app whose media layer sees the first audio sooner feeds it `mark`.
public struct CallQualityRecorder: Sendable, Equatable {
  public enum Milestone: String, Sendable, CaseIterable {
    case ringing, accepted, iceConnected, dtlsConnected, firstAudio, firstVideo
  }

  public let callId: CallID
  public let origin: Date
  public private(set) var milestones = CallMilestones()
  public private(set) var iceRestarts = 0
  private var connectedAt: Date?
  private var endedAt: Date?

  public init(callId: CallID, origin: Date) {
    self.callId = callId
    self.origin = origin
  }

  /// The first time of each milestone counts; a time before the origin counts as 0.
  public mutating func mark(_ milestone: Milestone, at date: Date) {
    let ms = Int(max(0, min(Double(CallMilestones.range.upperBound), date.timeIntervalSince(origin) * 1000)).rounded())
    switch milestone {
    case .ringing: milestones.ringing = milestones.ringing ?? ms
    case .accepted: milestones.accepted = milestones.accepted ?? ms
    case .iceConnected: milestones.iceConnected = milestones.iceConnected ?? ms
    case .dtlsConnected: milestones.dtlsConnected = milestones.dtlsConnected ?? ms
    case .firstAudio: milestones.firstAudio = milestones.firstAudio ?? ms
    case .firstVideo: milestones.firstVideo = milestones.firstVideo ?? ms
    }
  }

  /// A state of the call's engine. `connected` is the peer connection's aggregate state (ICE
  /// and DTLS both up): it marks DTLS, and ICE unless the media layer marked it earlier.
  public mutating func observe(_ state: CallEngine.State, at date: Date) {
    switch state {
    case .ringing, .incoming:
      mark(.ringing, at: date)
    case .connecting:
      mark(.accepted, at: date)
    case .connected:
      mark(.accepted, at: date)
      mark(.iceConnected, at: date)
      mark(.dtlsConnected, at: date)
      if connectedAt == nil { connectedAt = date }
    case .reconnecting(let attempt):
      iceRestarts = max(iceRestarts, attempt)
    case .ended:
      if endedAt == nil { endedAt = date }
    case .idle, .calling:
      break
    }
  }

  /// Statistics seen while the call is up: media that arrived marks its first arrival (at the
  /// time of these statistics, when the media layer did not say sooner).
  public mutating func observe(_ stats: PeerConnectionStats, at date: Date) {
    if stats.packetsReceived > 0 || stats.bytesReceived > 0 { mark(.firstAudio, at: date) }
    if let video = stats.video, video.framesDecoded > 0 { mark(.firstVideo, at: date) }
  }

  /// The report as of `now`, with the connection's statistics when there is one.
  public func report(final: Bool, stats: PeerConnectionStats?, now: Date) -> QualityReport {
    var report = QualityReport(callId: callId, final: final, milestones: milestones, iceRestarts: iceRestarts)
    if let connectedAt {
      report.durationMs = Int(min(86_400_000, max(0, (endedAt ?? now).timeIntervalSince(connectedAt) * 1000)).rounded())
    }
    guard let stats else { return report }
    report.rttMs = stats.roundTripTime.map { Self.clamp($0 * 1000, 60_000) }
    report.jitterMs = stats.jitter.map { Self.clamp($0 * 1000, 60_000) }
    let expected = Double(stats.packetsReceived) + Double(max(0, stats.packetsLost))
    if expected > 0 { report.lossPercent = Self.clamp(Double(max(0, stats.packetsLost)) / expected * 100, 100) }
    if let connectedAt {
      let seconds = (endedAt ?? now).timeIntervalSince(connectedAt)
      if seconds > 0 {
        report.sendKbps = Self.clamp(Double(stats.bytesSent) * 8 / 1000 / seconds, 100_000)
        report.receiveKbps = Self.clamp(Double(stats.bytesReceived) * 8 / 1000 / seconds, 100_000)
      }
    }
    report.localCandidateType = stats.localCandidateType.flatMap(CandidateType.init(rawValue:))
    report.remoteCandidateType = stats.remoteCandidateType.flatMap(CandidateType.init(rawValue:))
    // Only once audio arrived: there is nothing to score before.
    if stats.packetsReceived > 0 {
      // What the listener missed: the network's loss (before any repair: the estimate counts
      // the repair itself) and what came too late to play.
      let missed = Double(max(0, stats.packetsLost)) + Double(stats.packetsDiscarded)
      let mos = SpeechQualityEstimate.mos(
        lossPercent: expected > 0 ? min(100, missed / expected * 100) : 0, jitterMs: report.jitterMs,
        rttMs: report.rttMs, protection: stats.audioProtection, burstRatio: stats.audioBurstRatio)
      report.mos = (mos * 100).rounded() / 100
    }
    return report
  }

  /// Two decimals are plenty, and keep the report within the protocol's ranges.
  private static func clamp(_ value: Double, _ upper: Double) -> Double {
    guard value.isFinite else { return 0 }
    return (min(upper, max(0, value)) * 100).rounded() / 100
  }
}
