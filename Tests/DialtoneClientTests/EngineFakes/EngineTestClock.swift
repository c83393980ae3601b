import DialtoneClient
import Foundation

/// A virtual clock for `CallEngine` tests: `sleep(for:)` suspends until `advance(by:)` moves
/// virtual time past the deadline.
final class EngineTestClock: ClientClock, @unchecked Sendable {
  private struct Sleeper {
    var deadline: Double
    var continuation: CheckedContinuation<Void, any Error>?
  }

  private let lock = NSLock()
  private var elapsed: Double = 0
  private var sleepers: [Int: Sleeper] = [:]
  private var cancelled: Set<Int> = []
  private var nextId = 0
  private let start = Date(timeIntervalSince1970: 1_800_000_000)

  var now: Date { lock.withLock { start.addingTimeInterval(elapsed) } }
  var elapsedSeconds: Double { lock.withLock { elapsed } }

  /// Deadlines (relative to the virtual start) of the tasks currently sleeping.
  var pendingDeadlines: [Double] { lock.withLock { sleepers.values.map(\.deadline).sorted() } }

  func sleep(for seconds: Double) async throws {
    let id: Int = lock.withLock {
      nextId += 1
      return nextId
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
        let resumeNow: Result<Void, any Error>? = lock.withLock {
          if cancelled.remove(id) != nil { return .failure(CancellationError()) }
          if seconds <= 0 { return .success(()) }
          sleepers[id] = Sleeper(deadline: elapsed + seconds, continuation: c)
          return nil
        }
        if let resumeNow { c.resume(with: resumeNow) }
      }
    } onCancel: {
      let c: CheckedContinuation<Void, any Error>?? = lock.withLock {
        if let s = sleepers.removeValue(forKey: id) { return .some(s.continuation) }
        cancelled.insert(id)
        return .none
      }
      if case .some(let cont?) = c { cont.resume(throwing: CancellationError()) }
    }
  }

  /// Moves virtual time forward and wakes every sleeper whose deadline has passed.
  func advance(by seconds: Double) {
    let due: [CheckedContinuation<Void, any Error>] = lock.withLock {
      elapsed += seconds
      let ready = sleepers.filter { $0.value.deadline <= elapsed + 1e-9 }.sorted { $0.value.deadline < $1.value.deadline }
      for (id, _) in ready { sleepers.removeValue(forKey: id) }
      return ready.compactMap(\.value.continuation)
    }
    for c in due { c.resume() }
  }
}
