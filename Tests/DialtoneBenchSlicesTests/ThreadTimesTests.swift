import DialtoneBenchSlices
import Testing

@Suite struct ThreadTimesTests {
  @Test func sumsEachThreadsGrowth() {
    #expect(ThreadTimes.elapsedNanos(from: [1: 100, 2: 50], to: [1: 130, 2: 60]) == 40)
  }

  @Test func aThreadStartedInBetweenCountsFromZero() {
    #expect(ThreadTimes.elapsedNanos(from: [1: 100], to: [1: 110, 7: 25]) == 35)
  }

  @Test func aThreadEndedInBetweenIsLeftOut() {
    #expect(ThreadTimes.elapsedNanos(from: [1: 100, 2: 500], to: [1: 110]) == 10)
  }

  @Test func aReusedThreadIdWithLessTimeCountsFromZero() {
    #expect(ThreadTimes.elapsedNanos(from: [3: 900], to: [3: 40]) == 40)
  }
}
