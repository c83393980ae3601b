/// Which of the two targets an interleaved benchmark loads in each slice.
package enum SliceTarget: Int, Sendable, CaseIterable {
  case a = 0
  case b = 1

  package var other: SliceTarget { self == .a ? .b : .a }
}

/// The order of an interleaved run's slices: A B B A, repeated. Each adjacent pair (slices 2k,
/// 2k+1) holds one slice of each target, so a pair is one same-moment comparison; and a linear
/// drift of the machine's speed over four slices favours neither target, which A B A B would
/// not give (there A always runs first in its pair, so a steady slow-down would always favour A).
package struct SliceSchedule: Sendable, Equatable {
  /// Pairs run first and left out of every figure (connections, caches and the JIT warming up).
  package let warmupPairs: Int
  /// Pairs counted after the warm-up.
  package let measuredPairs: Int

  package init(warmupPairs: Int, measuredPairs: Int) {
    self.warmupPairs = max(0, warmupPairs)
    self.measuredPairs = max(0, measuredPairs)
  }

  /// Pairs for `seconds` of load per target in slices of `sliceSeconds` (at least one pair).
  package init(warmupPairs: Int, secondsPerTarget seconds: Double, sliceSeconds: Double) {
    let pairs = sliceSeconds > 0 && seconds.isFinite ? Int((seconds / sliceSeconds).rounded()) : 1
    self.init(warmupPairs: warmupPairs, measuredPairs: max(1, pairs))
  }

  package var slices: Int { 2 * (warmupPairs + measuredPairs) }

  package func target(ofSlice index: Int) -> SliceTarget { index % 4 == 0 || index % 4 == 3 ? .a : .b }

  /// Whether slice `index` is part of the warm-up.
  package func isWarmup(_ index: Int) -> Bool { index < 2 * warmupPairs }
}
