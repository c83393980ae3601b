import DialtoneClient
import DialtoneSupport
import Foundation

/// A virtual clock: `sleep(for:)` suspends until `advance(by:)` moves time past its deadline.
final class ManualClientClock: ClientClock, Sendable {
  private struct Sleeper: Sendable {
    let id: Int
    let deadline: Date
    let continuation: CheckedContinuation<Void, any Error>
  }
  private struct Timeline: Sendable {
    var time: Date
    var sleepers: [Sleeper] = []
    var cancelledEarly: Set<Int> = []
    var nextID = 0
  }

  private let start: Date
  private let timeline: Locked<Timeline>

  init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
    self.start = start
    timeline = Locked(Timeline(time: start))
  }

  var now: Date { timeline.withLock { $0.time } }

  /// How many tasks are sleeping on this clock.
  var sleeperCount: Int { timeline.withLock { $0.sleepers.count } }

  /// Virtual seconds since the start.
  var elapsedSeconds: Double { timeline.withLock { $0.time.timeIntervalSince(start) } }

  /// Deadlines (virtual seconds since the start) of the tasks currently sleeping.
  var pendingDeadlines: [Double] {
    timeline.withLock { timeline in timeline.sleepers.map { $0.deadline.timeIntervalSince(start) }.sorted() }
  }

  func sleep(for seconds: Double) async throws {
    let id = timeline.withLock {
      $0.nextID += 1
      return $0.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let immediate: Result<Void, any Error>? = timeline.withLock { timeline in
          if timeline.cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
          if seconds <= 0 { return .success(()) }
          timeline.sleepers.append(
            Sleeper(id: id, deadline: timeline.time.addingTimeInterval(seconds), continuation: continuation))
          return nil
        }
        if let immediate { continuation.resume(with: immediate) }
      }
    } onCancel: {
      let sleeper: Sleeper? = timeline.withLock { timeline in
        if let index = timeline.sleepers.firstIndex(where: { $0.id == id }) {
          return timeline.sleepers.remove(at: index)
        }
        timeline.cancelledEarly.insert(id)
        return nil
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward and wakes every sleeper whose deadline has passed.
  func advance(by seconds: Double) {
    let due: [Sleeper] = timeline.withLock { timeline in
      timeline.time = timeline.time.addingTimeInterval(seconds)
      // A nanosecond of slack: sums of Double seconds need not land exactly on a deadline.
      let horizon = timeline.time.addingTimeInterval(1e-9)
      let due = timeline.sleepers.filter { $0.deadline <= horizon }.sorted { $0.deadline < $1.deadline }
      timeline.sleepers.removeAll { $0.deadline <= horizon }
      return due
    }
    for sleeper in due { sleeper.continuation.resume() }
  }
}
