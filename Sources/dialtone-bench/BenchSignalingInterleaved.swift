import DialtoneBenchSlices
import DialtoneNet
import Foundation

/// `dialtone-bench signaling --interleave`: two targets up at once (Dialtone and the Node relay,
/// or two Dialtone builds), each with its idle sockets (held by a child process each) and its
/// call sockets connected, and the load switched between them in short slices, A B B A, so that
/// both see the same machine: this VM's speed drifts by up to 2× between runs half a minute
/// apart, which a sequential run reads as a difference between the targets.
enum BenchSignalingInterleaved {
  struct Side {
    let name: String
    let target: BenchSignalingCommand.StartedTarget
  }

  struct Settings {
    var sliceSeconds: Double
    var warmupPairs: Int
  }

  /// Starts both targets (and stops them on every path), runs the slices, prints the figures.
  static func run(
    _ options: BenchSignalingCommand.Options, _ settings: Settings,
    starting starters: [(name: String, start: () async throws -> BenchSignalingCommand.StartedTarget)]
  ) async throws {
    let schedule = SliceSchedule(
      warmupPairs: settings.warmupPairs, secondsPerTarget: options.seconds, sliceSeconds: settings.sliceSeconds)
    var sides: [Side] = []
    var holders: [IdleHolder] = []
    defer {
      for holder in holders { holder.stop() }
      for side in sides { side.target.stop() }
    }
    for starter in starters { sides.append(Side(name: starter.name, target: try await starter.start())) }
    // The holders outlive the run if something hangs: the slices, plus the connecting, plus a margin.
    let lifetime = Double(schedule.slices) * settings.sliceSeconds + 600
    for side in sides {
      let holder = try IdleHolder(side.target, count: options.idle, seconds: lifetime)
      holders.append(holder)
      try await holder.waitUntilReady(timeout: 180)
    }
    let client = try WebSocketClient(maxMessageBytes: 1 << 16, pingIntervalSeconds: 3600, idleTimeoutSeconds: 7200)
    do {
      let result = try await slices(options, schedule: schedule, settings: settings, sides: sides, client: client)
      await client.shutdown()
      print(result)
    } catch {
      await client.shutdown()
      throw error
    }
  }

  /// One target's counters at a slice boundary.
  private struct Reading {
    var threads: [Int32: UInt64]
    var process: ProcessStats
    var relayed: Int
    var at: Date

    init(_ side: Side, _ stats: LoadStats) throws {
      threads = ProcessStats.threadRunNanos(pid: side.target.pid)
      process = try ProcessStats.read(pid: side.target.pid)
      relayed = stats.relayedMessages
      at = Date()
    }
  }

  private static func slices(
    _ options: BenchSignalingCommand.Options, schedule: SliceSchedule, settings: Settings, sides: [Side],
    client: WebSocketClient
  ) async throws -> String {
    let stats = sides.map { _ in LoadStats() }
    let pairs = try sides.indices.map { side in
      try (0..<options.calls).map {
        try CallPair(
          index: $0, dialect: sides[side].target.dialect, candidates: options.candidates, client: client,
          stats: stats[side])
      }
    }
    defer { for pair in pairs.joined() { pair.close() } }
    for side in stats { try await side.waitForReady(2 * options.calls, timeout: 60) }

    for side in stats { side.startMeasuring() }
    var before = try sides.indices.map { try Reading(sides[$0], stats[$0]) }
    var records: [SliceRecord] = []
    for index in 0..<schedule.slices {
      let loaded = schedule.target(ofSlice: index)
      _ = try await BenchSignalingCommand.pace(
        pairs[loaded.rawValue], rate: options.rate, seconds: settings.sliceSeconds)
      if index == 2 * schedule.warmupPairs - 1 {
        // The warm-up's last slice: its messages and latencies are left out.
        for side in stats { side.startMeasuring() }
      }
      let after = try sides.indices.map { try Reading(sides[$0], stats[$0]) }
      if !schedule.isWarmup(index) {
        records.append(
          SliceRecord(
            loaded: loaded, seconds: after[loaded.rawValue].at.timeIntervalSince(before[loaded.rawValue].at),
            cpuSeconds: sides.indices.map {
              Double(ThreadTimes.elapsedNanos(from: before[$0].threads, to: after[$0].threads)) / 1e9
            },
            systemSeconds: sides.indices.map { after[$0].process.systemSeconds - before[$0].process.systemSeconds },
            messages: sides.indices.map { after[$0].relayed - before[$0].relayed }))
      }
      before = after
    }
    for side in stats { side.stopMeasuring() }
    let summary = InterleavedSummary(records: records)
    return table(options, schedule: schedule, settings: settings, sides: sides, stats: stats, summary: summary)
  }

  private static func table(
    _ options: BenchSignalingCommand.Options, schedule: SliceSchedule, settings: Settings, sides: [Side],
    stats: [LoadStats], summary: InterleavedSummary
  ) -> String {
    let perTarget = [summary.a, summary.b]
    var lines = [
      String(
        format:
          "bench-signaling, interleaved: %d concurrent calls, %d idle sockets each, target %d msg/s, %d slices of %.1f s per target (A B B A), the first %d pair(s) left out",
        options.calls, options.idle, options.rate, schedule.measuredPairs, settings.sliceSeconds,
        schedule.warmupPairs),
      "target".padding(toLength: 15, withPad: " ", startingAt: 0)
        + "relayed msg/s  p50 ms  p99 ms  p99.9 ms  RSS MB  CPU µs/msg  (of it sys)  whole run µs/msg  idle CPU %",
    ]
    for (index, side) in sides.enumerated() {
      let figures = perTarget[index]
      let percentile = stats[index].latencyPercentiles()
      let rss = (try? ProcessStats.read(pid: side.target.pid)).map { Double($0.rssBytes) / 1_048_576 } ?? .nan
      lines.append(
        side.name.padding(toLength: 15, withPad: " ", startingAt: 0)
          + String(
            format: "%13.0f  %6.3f  %6.3f  %8.3f  %6.1f  %10.2f  %11.2f  %16.2f  %10.2f", figures.messagesPerSecond,
            percentile(0.5), percentile(0.99), percentile(0.999), rss, figures.cpuMicrosPerMessage,
            figures.systemMicrosPerMessage, figures.wholeRunCPUMicrosPerMessage, figures.idleCPUPercent))
    }
    lines.append(
      "\(sides[0].name) ÷ \(sides[1].name), "
        + String(
          format:
            "CPU per relayed message: %.3f (its slices); median of %d pair ratios %.3f, quartiles %.3f–%.3f, 95 %% bootstrap %.3f–%.3f; whole run %.3f",
          summary.ratio, summary.pairRatios.count, summary.pairMedian,
          summary.pairLowerQuartile, summary.pairUpperQuartile, summary.bootstrapLow, summary.bootstrapHigh,
          summary.wholeRunRatio))
    lines.append("pair ratios: " + summary.pairRatios.map { String(format: "%.3f", $0) }.joined(separator: " "))
    lines.append(
      "pair µs/msg, \(sides[0].name): " + summary.pairMicros.map { String(format: "%.2f", $0.a) }.joined(separator: " ")
    )
    lines.append(
      "pair µs/msg, \(sides[1].name): " + summary.pairMicros.map { String(format: "%.2f", $0.b) }.joined(separator: " ")
    )
    return lines.joined(separator: "\n")
  }
}
