import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@Suite struct DialtoneClockTests {
  @Test func aSleepEndsWhenVirtualTimePassesItsDeadline() async throws {
    let clock = ManualClock()
    let woke = Locked(false)
    let sleeper = Task {
      try await clock.sleep(for: .seconds(3))
      woke.withLock { $0 = true }
    }
    #expect(await eventually { clock.pendingDeadlines == [3] })
    clock.advance(by: 2.5)
    try await Task.sleep(for: .milliseconds(20))
    #expect(woke.current == false)
    clock.advance(by: .milliseconds(500))
    try await sleeper.value
    #expect(woke.current)
    #expect(clock.pendingCount == 0)
  }

  @Test func cancellingASleepThrowsAndForgetsItsTimer() async {
    let clock = ManualClock()
    let sleeper = Task { try await clock.sleep(for: .seconds(10)) }
    #expect(await eventually { clock.pendingCount == 1 })
    sleeper.cancel()
    await #expect(throws: CancellationError.self) { try await sleeper.value }
    #expect(clock.pendingCount == 0)
    // Cancelled before it starts, and a zero delay: no timer at all.
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await clock.sleep(for: .seconds(1))
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    try? await clock.sleep(for: .zero)
    #expect(clock.pendingCount == 0)
  }

  @Test func theSystemClockRunsAndCancelsActions() async {
    let clock = SystemClock()
    let fired = Locked(0)
    _ = clock.schedule(after: .milliseconds(1)) { fired.withLock { $0 += 1 } }
    let cancelled = clock.schedule(after: .milliseconds(50)) { fired.withLock { $0 += 100 } }
    cancelled.cancel()
    #expect(await eventually { fired.current == 1 })
    try? await Task.sleep(for: .milliseconds(100))
    #expect(fired.current == 1)
    await #expect(throws: Never.self) { try await clock.sleep(for: .milliseconds(1)) }
  }

  @Test func lockedSerialisesConcurrentChanges() async {
    let counter = Locked(0)
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask { for _ in 0..<1000 { counter.withLock { $0 += 1 } } }
      }
    }
    #expect(counter.current == 8000)
  }

  @Test func durationsConvertToSeconds() {
    #expect(Duration.milliseconds(1500).seconds == 1.5)
    #expect(Duration.seconds(-2).seconds == -2)
  }
}
