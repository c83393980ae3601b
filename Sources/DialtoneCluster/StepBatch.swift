import Foundation

/// The session steps of consecutive hub events, stored by one job of the cluster's sender as one
/// transaction (group commit): while a job waits for its turn, the events after it add their
/// steps to it, so under load one round trip to Redis carries the messages of many events. A
/// batch closes when the job takes its steps, or when a job of another kind is queued after it
/// (jobs keep their order: a delivery never overtakes the session opening queued before it).
package final class StepBatch: @unchecked Sendable {
  // @unchecked: `steps` and `open` are only touched under `lock`.
  private let lock = NSLock()
  private var steps: [ClusterLink.PendingStep]
  private var open = true

  package init(_ steps: [ClusterLink.PendingStep]) { self.steps = steps }

  /// Adds steps, if the batch still takes them.
  package func add(_ more: [ClusterLink.PendingStep]) -> Bool {
    lock.withLock {
      guard open else { return false }
      steps += more
      return true
    }
  }

  package func close() { lock.withLock { open = false } }

  /// Every step added, closing the batch.
  package func take() -> [ClusterLink.PendingStep] {
    lock.withLock {
      open = false
      defer { steps = [] }
      return steps
    }
  }
}
