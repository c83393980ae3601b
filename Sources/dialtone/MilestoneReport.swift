import DialtoneClient
import DialtoneGStreamer
import DialtoneJSON
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Prints a call's milestones with their time since dial (or since the invite arrived), as
/// text or, with `--json`, as one JSON object per line ending with a summary.
final class MilestoneReport: Sendable {
  private struct Timeline: Sendable {
    var origin: ContinuousClock.Instant?
    var timings: [(String, Double)] = []
    var lastStats: PeerConnectionStats?
    var quality: QualityReport?
  }
  private let json: Bool
  private let timeline = Locked(Timeline())

  init(json: Bool) { self.json = json }

  /// Starts the clock (dial, or the invite's arrival).
  func start(_ what: String) {
    timeline.withLock { $0.origin = ContinuousClock.now }
    emit(event: "start", text: what, ms: 0)
  }

  /// A milestone, once per name; `instant`: when it happened, if that was before now.
  func mark(_ name: String, at instant: ContinuousClock.Instant? = nil) {
    let ms: Double? = timeline.withLock { timeline in
      guard let origin = timeline.origin, !timeline.timings.contains(where: { $0.0 == name }) else { return nil }
      let elapsed = (instant ?? ContinuousClock.now) - origin
      let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
      timeline.timings.append((name, ms))
      return ms
    }
    guard let ms else { return }
    emit(event: name, text: name, ms: ms)
  }

  /// A group call participant's change (joined, left, ...), with its time; not deduplicated.
  func participant(_ userId: String, _ change: String) {
    let ms: Double = timeline.withLock { timeline in
      guard let origin = timeline.origin else { return 0 }
      let elapsed = ContinuousClock.now - origin
      return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    }
    if json {
      line(
        .object([
          "event": .string("participant"), "user": .string(userId), "state": .string(change),
          "ms": .double((ms * 10).rounded() / 10),
        ]))
    } else {
      let figure = String(format: "%.1f", ms)
      line(String(repeating: " ", count: max(0, 9 - figure.count)) + figure + " ms  " + "\(userId) \(change)")
    }
  }

  /// The remote video a call received: frames decoded, the last one's size and mean colour.
  func video(frames: Int, width: Int, height: Int, rgb: (Int, Int, Int)) {
    if json {
      line(
        .object([
          "event": .string("video"), "frames": .int(Int64(frames)), "width": .int(Int64(width)),
          "height": .int(Int64(height)),
          "rgb": .array([.int(Int64(rgb.0)), .int(Int64(rgb.1)), .int(Int64(rgb.2))]),
        ]))
    } else {
      line("video: \(frames) frames, \(width)x\(height), mean colour \(rgb.0),\(rgb.1),\(rgb.2)")
    }
  }

  /// The video a group call received from one participant (over all of its streams).
  func participantVideo(_ userId: String, _ video: GStreamerPeerConnection.ReceivedVideo) {
    if json {
      line(
        .object([
          "event": .string("participant-video"), "user": .string(userId), "frames": .int(Int64(video.frames)),
          "width": .int(Int64(video.width)), "height": .int(Int64(video.height)),
          "rgb": .array([.int(Int64(video.red)), .int(Int64(video.green)), .int(Int64(video.blue))]),
        ]))
    } else {
      line(
        "video from \(userId): \(video.frames) frames, \(video.width)x\(video.height), "
          + "mean colour \(video.red),\(video.green),\(video.blue)")
    }
  }

  /// An event with fields of its own (JSON), or its text.
  func event(_ name: String, _ fields: [String: JSONValue], text: String) {
    if json {
      var object = fields
      object["event"] = .string(name)
      line(.object(object))
    } else {
      line(text)
    }
  }

  func note(_ text: String) {
    if json {
      line(.object(["event": .string("note"), "text": .string(text)]))
    } else {
      line(text)
    }
  }

  func received(_ text: String) {
    if json {
      line(.object(["event": .string("data"), "text": .string(text)]))
    } else {
      line("< \(text)")
    }
  }

  func stats(_ stats: PeerConnectionStats) {
    timeline.withLock { $0.lastStats = stats }
    if !json {
      let rtt = stats.roundTripTime.map { String(format: "%.1f ms", $0 * 1000) } ?? "n/a"
      line(
        "stats: sent \(stats.bytesSent) B / \(stats.packetsSent) pkts, received \(stats.bytesReceived) B / \(stats.packetsReceived) pkts, lost \(stats.packetsLost), rtt \(rtt), pair \(stats.localCandidateType ?? "?")/\(stats.remoteCandidateType ?? "?") over \(stats.transport ?? "?"), audio \(stats.audioCodec ?? "?")"
      )
      if let v = stats.video {
        line(
          "video stats (\(v.codec ?? "?")): sent \(v.bytesSent) B at a \(v.targetBitrate / 1000) kbit/s target, received \(v.bytesReceived) B, \(v.framesDecoded) frames \(v.frameWidth)x\(v.frameHeight) at \(Int(v.framesPerSecond.rounded())) fps, \(v.freezes) freezes, NACK/PLI received \(v.nacksReceived)/\(v.plisReceived), sent \(v.nacksSent)/\(v.plisSent)"
        )
      }
    }
  }

  /// The call's final quality report (protocol.md 7.19): its MOS estimate is printed at the end.
  func quality(_ report: QualityReport) {
    timeline.withLock { $0.quality = report }
    guard !json else { return }
    func figure(_ value: Double?, _ unit: String) -> String {
      value.map { String(format: "%.1f \(unit)", $0) } ?? "n/a"
    }
    let mos = report.mos.map { String(format: "%.2f", $0) } ?? "n/a"
    line(
      "quality: MOS \(mos) (estimated from loss \(figure(report.lossPercent, "%")), jitter \(figure(report.jitterMs, "ms")), "
        + "rtt \(figure(report.rttMs, "ms")))")
  }

  func finish(reason: String, status: Int32) {
    let (timings, stats, quality) = timeline.withLock { ($0.timings, $0.lastStats, $0.quality) }
    if json {
      var fields: [String: JSONValue] = [
        "event": .string("ended"), "reason": .string(reason), "status": .int(Int64(status)),
        "timings": .object(Dictionary(timings.map { ($0.0, JSONValue.double($0.1)) }, uniquingKeysWith: { a, _ in a })),
      ]
      if let stats {
        var s: [String: JSONValue] = [
          "bytesSent": .int(Int64(stats.bytesSent)), "bytesReceived": .int(Int64(stats.bytesReceived)),
          "packetsSent": .int(Int64(stats.packetsSent)), "packetsReceived": .int(Int64(stats.packetsReceived)),
          "packetsLost": .int(stats.packetsLost),
        ]
        if let rtt = stats.roundTripTime { s["roundTripTime"] = .double(rtt) }
        if let jitter = stats.jitter { s["jitter"] = .double(jitter) }
        if let t = stats.localCandidateType { s["localCandidateType"] = .string(t) }
        if let t = stats.remoteCandidateType { s["remoteCandidateType"] = .string(t) }
        if let t = stats.transport { s["transport"] = .string(t) }
        if let codec = stats.audioCodec { s["audioCodec"] = .string(codec) }
        s["packetsDiscarded"] = .int(Int64(clamping: stats.packetsDiscarded))
        if let burst = stats.audioBurstRatio { s["audioBurstRatio"] = .double(burst) }
        if let v = stats.video {
          s["video"] = .object([
            "bytesSent": .int(Int64(v.bytesSent)), "bytesReceived": .int(Int64(v.bytesReceived)),
            "packetsLost": .int(v.packetsLost), "framesDecoded": .int(Int64(v.framesDecoded)),
            "frameWidth": .int(Int64(v.frameWidth)), "frameHeight": .int(Int64(v.frameHeight)),
            "framesPerSecond": .double(v.framesPerSecond),
            "freezes": .int(Int64(v.freezes)), "nacksReceived": .int(Int64(v.nacksReceived)),
            "plisReceived": .int(Int64(v.plisReceived)), "nacksSent": .int(Int64(v.nacksSent)),
            "plisSent": .int(Int64(v.plisSent)), "targetBitrate": .int(Int64(v.targetBitrate)),
            "codec": v.codec.map(JSONValue.string) ?? .null,
          ])
        }
        fields["stats"] = .object(s)
      }
      if let quality {
        var q: [String: JSONValue] = [:]
        if let mos = quality.mos { q["mos"] = .double(mos) }
        if let loss = quality.lossPercent { q["lossPercent"] = .double(loss) }
        if let jitter = quality.jitterMs { q["jitterMs"] = .double(jitter) }
        if let rtt = quality.rttMs { q["rttMs"] = .double(rtt) }
        fields["quality"] = .object(q)
      }
      line(.object(fields))
    } else {
      line("ended: \(reason) (exit \(status))")
    }
  }

  private func emit(event: String, text: String, ms: Double) {
    if json {
      line(.object(["event": .string(event), "text": .string(text), "ms": .double((ms * 10).rounded() / 10)]))
    } else {
      let figure = String(format: "%.1f", ms)
      line(String(repeating: " ", count: max(0, 9 - figure.count)) + figure + " ms  " + text)
    }
  }

  private func line(_ value: JSONValue) { line(value.serializedString) }

  private func line(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
  }
}
