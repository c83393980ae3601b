import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Synchronization
import Testing

@testable import DialtoneNet

/// What the timers' actions saw: their names in firing order, each with whether it ran on the
/// network thread.
private final class Firings: Sendable {
  let executor: NetworkExecutor
  private let seen = Mutex<[(name: String, onLoop: Bool)]>([])
  private let arrivals = EventQueue<String>()

  init(executor: NetworkExecutor) { self.executor = executor }

  func action(_ name: String) -> @Sendable () -> Void {
    { [self] in
      let onLoop = executor.isCurrent
      seen.withLock { $0.append((name, onLoop)) }
      arrivals.push(name)
    }
  }

  /// The next firing's name (fails, never hangs, when none comes).
  func next() async throws -> String {
    let arrivals = self.arrivals
    return try await withDeadline(10, "a timer's firing") { await arrivals.next() }
  }

  /// Checks that the next firing is `name`'s.
  func expect(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let got = try await next()
    #expect(got == name, sourceLocation: sourceLocation)
  }

  var names: [String] { seen.withLock { $0.map(\.name) } }
  var allOnLoop: Bool { seen.withLock { $0.allSatisfy(\.onLoop) } }
}

/// Code run on the network thread, as the hub's is.
private actor OnLoop {
  nonisolated let executor: NetworkExecutor
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  init(_ executor: NetworkExecutor) { self.executor = executor }

  func schedule(_ delay: Duration, _ action: @escaping @Sendable () -> Void) -> (any ScheduledAction)? {
    executor.schedule(after: delay, action)
  }
  func schedule(_ timers: [(Duration, @Sendable () -> Void)]) -> [any ScheduledAction] {
    timers.compactMap { executor.schedule(after: $0.0, $0.1) }
  }
  func cancel(_ timer: any ScheduledAction) { timer.cancel() }
  /// Runs `body` in one turn of the loop: no timer fires in the middle of it.
  func run<T: Sendable>(_ body: @Sendable (NetworkExecutor) throws -> T) rethrows -> T { try body(executor) }
  func pending() -> Int? { executor.pendingLoopTimers }
  func clockSchedule(_ clock: NetworkLoopClock, _ action: @escaping @Sendable () -> Void) {
    _ = clock.schedule(after: .milliseconds(1), action)
  }
}

private func withLoop(_ body: (NetworkExecutor, OnLoop, Firings) async throws -> Void) async throws {
  let executor = NetworkExecutor()
  let server = try WebServer(
    configuration: WebServerConfiguration(port: 0), router: Router(), webSocketHandler: NoSockets(),
    executor: executor)
  let outcome: Result<Void, any Error>
  do {
    try await body(executor, OnLoop(executor), Firings(executor: executor))
    outcome = .success(())
  } catch {
    outcome = .failure(error)
  }
  await server.stop()
  try outcome.get()
}

private struct NoSockets: WebSocketHandler {
  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {}
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {}
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {}
}

struct LoopTimersTests {
  @Test func aTimerFiresOnceOnTheNetworkThread() async throws {
    try await withLoop { _, loop, firings in
      #expect(await loop.schedule(.milliseconds(1), firings.action("a")) != nil)
      #expect(await loop.schedule(.milliseconds(30), firings.action("b")) != nil)
      try await firings.expect("a")
      try await firings.expect("b")
      #expect(firings.names == ["a", "b"])
      #expect(firings.allOnLoop)
      #expect(await loop.pending() == 0)
    }
  }

  /// An expiry is consumed by the descriptor's re-arming or disarming, not by a read of it: were
  /// it left readable, the loop would be woken by the same expiry again and again.
  @Test func eachArmingOfTheDescriptorExpiresOnce() async throws {
    try await withLoop { _, loop, firings in
      #expect(await loop.schedule(.milliseconds(1), firings.action("a")) != nil)
      try await firings.expect("a")
      #expect(await loop.schedule(.milliseconds(20), firings.action("b")) != nil)
      #expect(await loop.schedule(.milliseconds(40), firings.action("c")) != nil)
      try await firings.expect("b")
      try await firings.expect("c")
      #expect(await loop.run { $0.loopTimerExpiries?.timers } == 3)
    }
  }

  @Test func aTimerCancelledBeforeItsDeadlineNeverRunsAndLeavesTheHeap() async throws {
    try await withLoop { _, loop, firings in
      let pending = await loop.run { executor in
        let cancelled = executor.schedule(after: .milliseconds(20), firings.action("cancelled"))
        _ = executor.schedule(after: .milliseconds(60), firings.action("kept"))
        let before = executor.pendingLoopTimers
        cancelled?.cancel()
        return [before, executor.pendingLoopTimers]
      }
      #expect(pending == [2, 1])
      try await firings.expect("kept")
      #expect(firings.names == ["kept"])
      #expect(await loop.pending() == 0)
    }
  }

  @Test func cancellingOffTheNetworkThreadStillStopsTheTimer() async throws {
    try await withLoop { _, loop, firings in
      let cancelled = try #require(await loop.schedule(.milliseconds(500), firings.action("cancelled")))
      #expect(await loop.schedule(.milliseconds(700), firings.action("kept")) != nil)
      cancelled.cancel()
      try await firings.expect("kept")
      #expect(firings.names == ["kept"])
      #expect(await loop.pending() == 0)
    }
  }

  @Test func cancellingAfterTheFiringChangesNothing() async throws {
    try await withLoop { _, loop, firings in
      let fired = try #require(await loop.schedule(.milliseconds(1), firings.action("a")))
      try await firings.expect("a")
      await loop.cancel(fired)
      fired.cancel()
      #expect(await loop.schedule(.milliseconds(1), firings.action("b")) != nil)
      try await firings.expect("b")
      #expect(firings.names == ["a", "b"])
    }
  }

  @Test func timersFireInDeadlineOrder() async throws {
    try await withLoop { _, loop, firings in
      // Scheduled in one turn of the loop: the zero delays in the order they were scheduled.
      let scheduled = await loop.schedule([
        (.milliseconds(40), firings.action("c")), (.zero, firings.action("a0")),
        (.milliseconds(20), firings.action("b")),
        (.zero, firings.action("a1")), (.milliseconds(-5), firings.action("a2")),
      ])
      #expect(scheduled.count == 5)
      for _ in 0..<5 { _ = try await firings.next() }
      #expect(firings.names == ["a0", "a1", "a2", "b", "c"])
    }
  }

  @Test func anActionThatSchedulesAgainGetsItsTimerOnTheLoop() async throws {
    try await withLoop { executor, loop, firings in
      let second = firings.action("second")
      let rescheduled = Mutex(false)
      #expect(
        await loop.schedule(.milliseconds(1)) {
          firings.action("first")()
          rescheduled.withLock { $0 = executor.schedule(after: .zero, second) != nil }
        } != nil)
      try await firings.expect("first")
      try await firings.expect("second")
      #expect(rescheduled.withLock { $0 })
      #expect(firings.allOnLoop)
    }
  }

  @Test func manyTimersEachFireOnceUnlessCancelled() async throws {
    try await withLoop { _, loop, firings in
      var generator = SeededGenerator(seed: 7)
      var plan: [(name: String, delay: Duration, cancel: Bool)] = []
      for index in 0..<300 {
        plan.append(("t\(index)", .milliseconds(Int64(generator.next() % 40)), generator.next() % 3 == 0))
      }
      let cancelled = Set(plan.filter(\.cancel).map(\.name))
      let schedule = plan
      let pending = await loop.run { executor in
        let timers = schedule.map { ($0.cancel, executor.schedule(after: $0.delay, firings.action($0.name))) }
        for (cancel, timer) in timers where cancel { timer?.cancel() }
        return (timers.allSatisfy { $0.1 != nil }, executor.pendingLoopTimers)
      }
      #expect(pending.0)
      #expect(pending.1 == 300 - cancelled.count)
      let expected = Set(plan.map(\.name)).subtracting(cancelled)
      for _ in 0..<expected.count { _ = try await firings.next() }
      // Every cancel took its timer out of the heap; what fired is each timer left, once.
      #expect(await loop.pending() == 0)
      #expect(firings.names.count == expected.count)
      #expect(Set(firings.names) == expected)
    }
  }

  @Test func offTheNetworkThreadTheClockUsesItsBase() async throws {
    try await withLoop { executor, loop, firings in
      #expect(executor.schedule(after: .milliseconds(1), firings.action("declined")) == nil)
      let clock = NetworkLoopClock(executor: executor)
      _ = clock.schedule(after: .milliseconds(1), firings.action("base"))
      try await firings.expect("base")
      await loop.clockSchedule(clock, firings.action("loop"))
      try await firings.expect("loop")
      #expect(firings.names == ["base", "loop"])
      #expect(await loop.pending() == 0)
    }
  }

  @Test func pendingTimersOutliveTheLoop() async throws {
    let executor = NetworkExecutor()
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: Router(), webSocketHandler: NoSockets(),
      executor: executor)
    let loop = OnLoop(executor)
    let firings = Firings(executor: executor)
    let cancelled = try #require(await loop.schedule(.seconds(2), firings.action("cancelled")))
    #expect(await loop.schedule(.seconds(3), firings.action("kept")) != nil)
    #expect(await loop.pending() == 2)
    await server.stop()
    // Stopped: the loop has let its timers go (to a dispatch timer each), and cancelling one
    // from here still works.
    #expect(executor.pendingLoopTimers == nil)
    cancelled.cancel()
    try await firings.expect("kept")
    #expect(firings.names == ["kept"])
    #expect(!firings.allOnLoop)
  }
}
