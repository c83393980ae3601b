import DialtoneSupport
import Foundation

/// The session steps of consecutive hub events, stored by one job of the cluster's sender as one
/// transaction (group commit): while a job waits for its turn, the events after it add their
/// steps to it, so under load one round trip to Redis carries the messages of many events. A
/// batch closes when the job takes its steps, or when a job of another kind is queued after it
/// (jobs keep their order: a delivery never overtakes the session opening queued before it).
package final class StepBatch: Sendable {
  private let state: Locked<(steps: [ClusterLink.PendingStep], open: Bool)>

  package init(_ steps: [ClusterLink.PendingStep]) { state = Locked((steps, true)) }

  /// Adds steps, if the batch still takes them.
  package func add(_ more: [ClusterLink.PendingStep]) -> Bool {
    state.withLock { batch in
      guard batch.open else { return false }
      batch.steps += more
      return true
    }
  }

  package func close() { state.withLock { $0.open = false } }

  /// Every step added, closing the batch.
  package func take() -> [ClusterLink.PendingStep] {
    state.withLock { batch in
      batch.open = false
      defer { batch.steps = [] }
      return batch.steps
    }
  }
}
