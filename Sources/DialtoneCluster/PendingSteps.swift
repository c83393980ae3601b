/// The session steps the hub asked for and the sender has not been given yet, in the hub's
/// order. The first `sealed` of them belong to hub events that ended (`ClusterLink.seal`): a
/// job queued now must come after them, as it would have had the hub flushed after each event,
/// while the steps of the event still being handled stay behind it, as they always did (they
/// are flushed at its end). Letting ended events' steps wait for the end of the hub's turn is
/// what lets one transaction carry every event of that turn (one hand-off to the sender and
/// one back for all of them, not one per event).
package struct PendingSteps: Sendable {
  private(set) var steps: [ClusterLink.PendingStep] = []
  /// How many of `steps` (a prefix) belong to events that ended.
  private(set) var sealed = 0

  package init() {}

  package var isEmpty: Bool { steps.isEmpty }

  package mutating func append(_ step: ClusterLink.PendingStep) { steps.append(step) }

  package mutating func add(_ more: [ClusterLink.PendingStep]) { steps += more }

  /// The event being handled ended: its steps go with the next flush, or before the next job.
  package mutating func seal() { sealed = steps.count }

  /// The steps of the events that ended, leaving those of the event being handled.
  package mutating func takeSealed() -> [ClusterLink.PendingStep] {
    guard sealed > 0 else { return [] }
    let taken = Array(steps[..<sealed])
    steps.removeFirst(sealed)
    sealed = 0
    return taken
  }

  /// Every step.
  package mutating func takeAll() -> [ClusterLink.PendingStep] {
    sealed = 0
    defer { steps.removeAll(keepingCapacity: true) }
    return steps
  }
}
