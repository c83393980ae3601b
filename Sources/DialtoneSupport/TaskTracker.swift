import Foundation

/// Keeps the tasks it started, so that they can all be awaited (a shutdown waits for pushes
/// and SFU requests in flight).
public final class TaskTracker: Sendable {
  private let tasks = Locked<[UUID: Task<Void, Never>]>([:])

  public init() {}

  public func start(_ work: @escaping @Sendable () async -> Void) {
    let id = UUID()
    // Made and stored under one lock: a task that ends at once cannot remove its entry before it is stored.
    tasks.withLock {
      $0[id] = Task { [weak self] in
        await work()
        self?.finished(id)
      }
    }
  }

  private func finished(_ id: UUID) { tasks.withLock { _ = $0.removeValue(forKey: id) } }

  public func waitForAll() async {
    while let task = tasks.withLock({ $0.values.first }) { await task.value }
  }
}
