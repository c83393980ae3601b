import DialtoneCalls
import DialtoneMetrics
import DialtoneProtocol
import DialtonePush
import DialtoneSupport
import Foundation

/// Where the server's subsystems report what happened: the Prometheus metrics, and the
/// bounded recent history the admin dashboard plots. A `CallEffectSink`, so call starts and
/// ends arrive like the other subsystems' call events.
final class Observations: CallEffectSink, Sendable {
  let metrics: ServerMetrics
  let timeline = ActivityTimeline()
  let setupTimes = SetupTimeSamples()
  let startedAt: Date
  private let clock: any DialtoneClock
  private let log: Log

  init(version: String, clock: any DialtoneClock, log: Log) {
    self.clock = clock
    self.log = log
    startedAt = clock.now
    metrics = ServerMetrics(version: version, startedAt: clock.now)
  }

  // MARK: Calls

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    switch event {
    case .ringing(let callId, _, _, let video, _):
      metrics.callsStarted.labels(video ? "true" : "false").increment()
      log.info("call started ringing\(video ? " (video)" : "")", callId: callId)
    case .ended(let record):
      let reason = record.endReason?.rawValue ?? "unknown"
      metrics.callsEnded.labels(reason).increment()
      if let answeredAt = record.answeredAt {
        metrics.answerTime.observe(Double(answeredAt - record.createdAt) / 1000)
        if let duration = record.durationMs { metrics.callDuration.observe(Double(duration) / 1000) }
      }
      timeline.record(at: clock.now) { $0.ended[reason, default: 0] += 1 }
      // Formatted only when the line is written (`String(format:)` is not cheap, and this runs per call).
      log.info(
        "call ended: \(reason)\(record.durationMs.map { String(format: " after %.1f s", Double($0) / 1000) } ?? "")",
        callId: record.callId)
    case .groupRinging, .groupRingStopped:
      break
    case .groupEnded(let record):
      metrics.groupCallsEnded.labels(record.endReason.rawValue).increment()
    }
  }

  /// A callee device's `ringing`, `seconds` after the invite arrived.
  func calleeRang(after seconds: Double) { metrics.ringTime.observe(max(0, seconds)) }

  // MARK: Quality reports

  func qualityStored(_ stored: StoredQualityReport) {
    let report = stored.report
    metrics.qualityReports.labels(report.final ? "true" : "false").increment()
    guard report.final else { return }
    if let setup = report.milestones?.setupMs {
      metrics.setupTime.labels(stored.role == "caller" ? "caller" : "callee").observe(Double(setup) / 1000)
      setupTimes.add(setup)
    }
    if let relayed = report.relayed {
      metrics.mediaPaths.labels(relayed ? "relay" : "direct").increment()
      timeline.record(at: clock.now) { bucket in
        if relayed { bucket.relayed += 1 } else { bucket.direct += 1 }
      }
    }
    if let rtt = report.rttMs { metrics.roundTripTime.observe(rtt / 1000) }
    if let loss = report.lossPercent { metrics.packetLoss.observe(loss / 100) }
    if let restarts = report.iceRestarts { metrics.iceRestarts.increment(by: Double(restarts)) }
  }

  // MARK: Pushes and ICE servers

  func pushAttempted(kind: PushTokenKind, outcome: PushOutcome) {
    let provider = kind == .fcm ? "fcm" : "apns"
    let result: String
    switch outcome {
    case .delivered: result = "delivered"
    case .invalidToken: result = "invalid_token"
    case .failed: result = "failed"
    case .retryable: result = "retryable"
    }
    metrics.pushRequests.labels(provider, kind.rawValue, result).increment()
    timeline.record(at: clock.now) { bucket in
      if case .delivered = outcome { bucket.pushesSent += 1 } else { bucket.pushFailures += 1 }
    }
  }

  func pushTokenRemoved(kind: PushTokenKind) {
    metrics.pushTokensRemoved.labels(kind == .fcm ? "fcm" : "apns").increment()
  }

  /// An ICE server list handed out (`source`: welcome, http).
  func iceServersIssued(_ servers: [IceServer], source: String) {
    metrics.iceServerRequests.labels(source).increment()
    if servers.contains(where: { $0.credential != nil }) { metrics.turnCredentialsIssued.increment() }
  }
}
