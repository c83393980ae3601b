import DialtoneBenchSlices
import Testing

@Suite struct SliceScheduleTests {
  @Test func ordersSlicesABBA() {
    let schedule = SliceSchedule(warmupPairs: 1, measuredPairs: 3)
    #expect(schedule.slices == 8)
    #expect((0..<8).map { schedule.target(ofSlice: $0) } == [.a, .b, .b, .a, .a, .b, .b, .a])
  }

  @Test func everyPairHoldsOneSliceOfEachTarget() {
    let schedule = SliceSchedule(warmupPairs: 0, measuredPairs: 50)
    for pair in 0..<50 {
      #expect(Set([schedule.target(ofSlice: 2 * pair), schedule.target(ofSlice: 2 * pair + 1)]).count == 2)
    }
  }

  @Test func warmupIsTheFirstPairs() {
    let schedule = SliceSchedule(warmupPairs: 2, measuredPairs: 1)
    #expect((0..<6).map(schedule.isWarmup) == [true, true, true, true, false, false])
  }

  @Test func pairsFromSecondsPerTarget() {
    #expect(SliceSchedule(warmupPairs: 1, secondsPerTarget: 20, sliceSeconds: 1).measuredPairs == 20)
    #expect(SliceSchedule(warmupPairs: 1, secondsPerTarget: 20, sliceSeconds: 2).measuredPairs == 10)
    // Never no pair at all, and nonsense counts are clamped.
    #expect(SliceSchedule(warmupPairs: 1, secondsPerTarget: 0.2, sliceSeconds: 1).measuredPairs == 1)
    #expect(SliceSchedule(warmupPairs: -3, secondsPerTarget: 5, sliceSeconds: 0).measuredPairs == 1)
    #expect(SliceSchedule(warmupPairs: -3, measuredPairs: 2).warmupPairs == 0)
  }
}
