import DialtoneBenchSlices
import Testing

/// A slice in which `loaded` relayed `messages` at `micros` µs of CPU each, and the other target
/// spent `idleSeconds` and relayed `tail` messages left over from its previous slice.
private func slice(
  _ loaded: SliceTarget, messages: Int, micros: Double, idleSeconds: Double = 0, tail: Int = 0, seconds: Double = 1
) -> SliceRecord {
  var cpu = [0.0, 0.0]
  var counts = [0, 0]
  cpu[loaded.rawValue] = Double(messages) * micros / 1_000_000
  counts[loaded.rawValue] = messages
  cpu[loaded.other.rawValue] = idleSeconds
  counts[loaded.other.rawValue] = tail
  return SliceRecord(
    loaded: loaded, seconds: seconds, cpuSeconds: cpu, systemSeconds: cpu.map { $0 / 2 }, messages: counts)
}

@Suite struct InterleavedSummaryTests {
  @Test func perMessageFiguresAndRatioFromTheSlicesSums() {
    let records = [
      slice(.a, messages: 1_000, micros: 18), slice(.b, messages: 1_000, micros: 20),
      slice(.b, messages: 3_000, micros: 20), slice(.a, messages: 1_000, micros: 22),
    ]
    let summary = InterleavedSummary(records: records)
    #expect(abs(summary.a.cpuMicrosPerMessage - 20) < 1e-9)
    #expect(abs(summary.b.cpuMicrosPerMessage - 20) < 1e-9)
    #expect(abs(summary.a.systemMicrosPerMessage - 10) < 1e-9)
    #expect(abs(summary.ratio - 1) < 1e-9)
    #expect(summary.a.messagesPerSecond == 1_000)
    #expect(summary.b.messagesPerSecond == 2_000)
    // Pair 1: 18 ÷ 20; pair 2: 22 ÷ 20.
    #expect(summary.pairRatios.count == 2)
    #expect(abs(summary.pairRatios[0] - 0.9) < 1e-9)
    #expect(abs(summary.pairRatios[1] - 1.1) < 1e-9)
    #expect(abs(summary.pairMedian - 1.0) < 1e-9)
    // Which target moved between the pairs: A, from 18 to 22.
    #expect(summary.pairMicros.map(\.a).map { $0.rounded() } == [18, 22])
    #expect(summary.pairMicros.map(\.b).map { $0.rounded() } == [20, 20])
  }

  // The machine running twice as slow in the second pair moves both targets alike: the ratio
  // holds, which is the point of interleaving.
  @Test func aMachineWideSlowdownCancelsInEachPair() {
    let records = [
      slice(.a, messages: 1_000, micros: 18), slice(.b, messages: 1_000, micros: 20),
      slice(.b, messages: 1_000, micros: 40), slice(.a, messages: 1_000, micros: 36),
    ]
    let summary = InterleavedSummary(records: records)
    #expect(summary.pairRatios.allSatisfy { abs($0 - 0.9) < 1e-9 })
    #expect(abs(summary.bootstrapLow - 0.9) < 1e-9)
    #expect(abs(summary.bootstrapHigh - 0.9) < 1e-9)
  }

  @Test func idleCostCountsInTheWholeRunOnly() {
    // A spends 0.01 s while B is loaded, and relays 10 messages of its tail there.
    let records = [
      slice(.a, messages: 990, micros: 20), slice(.b, messages: 1_000, micros: 20, idleSeconds: 0.01, tail: 10),
    ]
    let summary = InterleavedSummary(records: records)
    #expect(abs(summary.a.cpuMicrosPerMessage - 20) < 1e-9)
    // (0.0198 s + 0.01 s) ÷ 1,000 messages.
    #expect(abs(summary.a.wholeRunCPUMicrosPerMessage - 29.8) < 1e-9)
    #expect(abs(summary.a.idleCPUPercent - 1) < 1e-9)
    #expect(summary.b.idleCPUPercent == 0)
    #expect(abs(summary.wholeRunRatio - 1.49) < 1e-9)
  }

  @Test func bootstrapIsReproducibleAndBracketsTheRatio() {
    let micros: [Double] = [18, 21, 19, 23, 17, 20, 22, 19]
    let records = micros.enumerated().flatMap { index, value in
      let pair = [slice(.a, messages: 1_000, micros: value), slice(.b, messages: 1_000, micros: 20)]
      return index % 2 == 0 ? pair : pair.reversed()
    }
    let one = InterleavedSummary(records: records, seed: 7)
    let again = InterleavedSummary(records: records, seed: 7)
    #expect(one.bootstrapLow == again.bootstrapLow && one.bootstrapHigh == again.bootstrapHigh)
    #expect(one.bootstrapLow <= one.ratio && one.ratio <= one.bootstrapHigh)
    #expect(one.bootstrapLow < one.bootstrapHigh)
    #expect(one.pairLowerQuartile <= one.pairMedian && one.pairMedian <= one.pairUpperQuartile)
  }

  @Test func aPairWithoutBothTargetsOrMessagesIsNoFigure() {
    let summary = InterleavedSummary(records: [
      slice(.a, messages: 1_000, micros: 20), slice(.a, messages: 5, micros: 1),
    ])
    #expect(summary.pairRatios.isEmpty)
    #expect(summary.pairMedian.isNaN)
    #expect(summary.b.cpuMicrosPerMessage.isNaN)
    #expect(InterleavedSummary(records: []).ratio.isNaN)
  }
}

@Suite struct QuantileTests {
  @Test func interpolatesBetweenRanks() {
    #expect(Quantile.of([1, 2, 3, 4], 0.5) == 2.5)
    #expect(Quantile.of([1, 2, 3, 4, 5], 0.25) == 2)
    #expect(Quantile.of([7], 0.9) == 7)
    #expect(Quantile.of([], 0.5).isNaN)
  }
}
