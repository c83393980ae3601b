import Dispatch
import Testing

@testable import DialtoneMetrics

struct CounterTests {
  @Test func addsWholeAndFractionalAmountsAndIgnoresTheRest() {
    let counter = Counter()
    #expect(counter.current == 0)
    counter.increment()
    counter.increment(by: 2.5)
    counter.increment(by: 0)
    counter.increment(by: -3)
    counter.increment(by: .nan)
    counter.increment(by: .infinity)
    #expect(counter.current == 3.5)
  }

  /// Increments racing on several threads are each counted once (no update lost between a
  /// read and its swap).
  @Test func concurrentIncrementsAreAllCounted() {
    let counter = Counter()
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for _ in 0..<20_000 { counter.increment() }
    }
    #expect(counter.current == 160_000)
  }
}
