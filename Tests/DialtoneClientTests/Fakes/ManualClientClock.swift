import DialtoneClient
import Foundation

/// A virtual clock: `sleep(for:)` suspends until `advance(by:)` moves time past its deadline.
final class ManualClientClock: ClientClock, @unchecked Sendable {
  private struct Sleeper {
    let id: Int
    let deadline: Date
    let continuation: CheckedContinuation<Void, any Error>
  }

  private let lock = NSLock()
  private let start: Date
  private var time: Date
  private var sleepers: [Sleeper] = []
  private var cancelledEarly: Set<Int> = []
  private var nextID = 0

  init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
    self.start = start
    time = start
  }

  var now: Date { lock.withLock { time } }

  /// How many tasks are sleeping on this clock.
  var sleeperCount: Int { lock.withLock { sleepers.count } }

  /// Virtual seconds since the start.
  var elapsedSeconds: Double { lock.withLock { time.timeIntervalSince(start) } }

  /// Deadlines (virtual seconds since the start) of the tasks currently sleeping.
  var pendingDeadlines: [Double] { lock.withLock { sleepers.map { $0.deadline.timeIntervalSince(start) }.sorted() } }

  func sleep(for seconds: Double) async throws {
    let id = lock.withLock { () -> Int in
      nextID += 1
      return nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let immediate: Result<Void, any Error>? = lock.withLock {
          if cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
          if seconds <= 0 { return .success(()) }
          sleepers.append(Sleeper(id: id, deadline: time.addingTimeInterval(seconds), continuation: continuation))
          return nil
        }
        if let immediate { continuation.resume(with: immediate) }
      }
    } onCancel: {
      let sleeper = lock.withLock { () -> Sleeper? in
        if let index = sleepers.firstIndex(where: { $0.id == id }) { return sleepers.remove(at: index) }
        cancelledEarly.insert(id)
        return nil
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward and wakes every sleeper whose deadline has passed.
  func advance(by seconds: Double) {
    let due = lock.withLock { () -> [Sleeper] in
      time = time.addingTimeInterval(seconds)
      // A nanosecond of slack: sums of Double seconds need not land exactly on a deadline.
      let horizon = time.addingTimeInterval(1e-9)
      let due = sleepers.filter { $0.deadline <= horizon }.sorted { $0.deadline < $1.deadline }
      sleepers.removeAll { $0.deadline <= horizon }
      return due
    }
    for sleeper in due { sleeper.continuation.resume() }
  }
}
