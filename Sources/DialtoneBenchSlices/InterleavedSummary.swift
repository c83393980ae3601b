import DialtoneSupport

/// The figures of an interleaved run, from its measured slices (the warm-up left out), in order.
///
/// Two accountings of a target's CPU per relayed message:
/// - slice windows: its CPU during its own slices ÷ the messages it relayed in them. The tail of
///   a slice (messages in flight at the switch) lands in the other target's slice and is lost to
///   both figures, as is the head of the next: a few milliseconds of a one-second slice.
/// - whole run: all its CPU over the run, loaded or idle, ÷ all its messages. Nothing is lost at
///   the switches, but its idle cost over the other's slices (its timers, its 10,000 idle
///   sockets' pings) counts as if it were cost per message.
/// The spread is from the pairs (slices 2k and 2k+1, one of each target, adjacent in time).
package struct InterleavedSummary: Sendable {
  package struct Target: Sendable {
    /// Slice windows (above).
    package var cpuMicrosPerMessage: Double
    /// The kernel's part of `cpuMicrosPerMessage`.
    package var systemMicrosPerMessage: Double
    /// Whole run (above).
    package var wholeRunCPUMicrosPerMessage: Double
    /// Its CPU while the other target was loaded, in % of one core.
    package var idleCPUPercent: Double
    /// Messages it relayed per second of its own slices.
    package var messagesPerSecond: Double
  }

  /// Both targets' figures in one pair of slices.
  package struct PairFigures: Sendable, Equatable {
    package var a: Double
    package var b: Double
  }

  package let a: Target
  package let b: Target
  /// A's CPU per message ÷ B's, slice windows, from the sums over all measured slices.
  package let ratio: Double
  /// The same from the whole-run accounting.
  package let wholeRunRatio: Double
  /// One ratio (slice windows) per measured pair, in order.
  package let pairRatios: [Double]
  /// Each target's CPU per message in each measured pair, in order: a ratio that moves through a
  /// run says which target moved (one getting cheaper as it warms, the other dearer as it grows).
  package let pairMicros: [PairFigures]
  package let pairMedian: Double
  package let pairLowerQuartile: Double
  package let pairUpperQuartile: Double
  /// A 95 % interval of `ratio`: the pairs resampled with replacement (a seeded generator, so
  /// the same records give the same interval).
  package let bootstrapLow: Double
  package let bootstrapHigh: Double

  package init(records: [SliceRecord], resamples: Int = 2_000, seed: UInt64 = 1) {
    a = Self.target(.a, records)
    b = Self.target(.b, records)
    ratio = a.cpuMicrosPerMessage / b.cpuMicrosPerMessage
    wholeRunRatio = a.wholeRunCPUMicrosPerMessage / b.wholeRunCPUMicrosPerMessage
    let pairs = stride(from: 0, to: records.count - 1, by: 2).map { Array(records[$0...$0 + 1]) }
      .filter { Set($0.map(\.loaded)).count == 2 }
    pairMicros = pairs.map {
      PairFigures(a: Self.target(.a, $0).cpuMicrosPerMessage, b: Self.target(.b, $0).cpuMicrosPerMessage)
    }
    pairRatios = pairMicros.map { $0.a / $0.b }
    let sorted = pairRatios.filter(\.isFinite).sorted()
    pairMedian = Quantile.of(sorted, 0.5)
    pairLowerQuartile = Quantile.of(sorted, 0.25)
    pairUpperQuartile = Quantile.of(sorted, 0.75)
    var generator = SplitMix64(seed: seed)
    var resampled: [Double] = []
    if !pairs.isEmpty {
      for _ in 0..<max(0, resamples) {
        let drawn = (0..<pairs.count).flatMap { _ in pairs[Int(generator.next() % UInt64(pairs.count))] }
        let value = Self.ratio(of: drawn)
        if value.isFinite { resampled.append(value) }
      }
    }
    resampled.sort()
    bootstrapLow = Quantile.of(resampled, 0.025)
    bootstrapHigh = Quantile.of(resampled, 0.975)
  }

  /// A's CPU per message over its slices in `records` ÷ B's over theirs.
  static func ratio(of records: [SliceRecord]) -> Double {
    target(.a, records).cpuMicrosPerMessage / target(.b, records).cpuMicrosPerMessage
  }

  static func target(_ target: SliceTarget, _ records: [SliceRecord]) -> Target {
    let own = records.filter { $0.loaded == target }
    let others = records.filter { $0.loaded != target }
    let messages = Double(own.reduce(0) { $0 + $1.relayed(target) })
    let allMessages = Double(records.reduce(0) { $0 + $1.relayed(target) })
    let ownSeconds = own.reduce(0) { $0 + $1.seconds }
    let otherSeconds = others.reduce(0) { $0 + $1.seconds }
    func perMessage(_ seconds: Double, _ count: Double) -> Double { count > 0 ? seconds / count * 1_000_000 : .nan }
    return Target(
      cpuMicrosPerMessage: perMessage(own.reduce(0) { $0 + $1.cpu(target) }, messages),
      systemMicrosPerMessage: perMessage(own.reduce(0) { $0 + $1.system(target) }, messages),
      wholeRunCPUMicrosPerMessage: perMessage(records.reduce(0) { $0 + $1.cpu(target) }, allMessages),
      idleCPUPercent: otherSeconds > 0 ? others.reduce(0) { $0 + $1.cpu(target) } / otherSeconds * 100 : .nan,
      messagesPerSecond: ownSeconds > 0 ? messages / ownSeconds : .nan)
  }
}
