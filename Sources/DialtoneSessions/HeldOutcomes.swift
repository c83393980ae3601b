import DialtoneProtocol

/// What the hub holds back until the journal has written it: per call, outcomes in the order
/// they were made, each behind a journal ticket. An outcome that writes nothing still waits for
/// the ones of its call before it, so a call's messages are never seen out of order (the
/// caller never gets the callee's candidates before its `accept`).
package struct HeldOutcomes<Item> {
  private var queues: [CallID: [(ticket: UInt64, order: UInt64, item: Item)]] = [:]
  private var order: UInt64 = 0

  package var isEmpty: Bool { queues.isEmpty }

  /// The ticket an outcome of `callId` that writes nothing must wait for, if any.
  package func pendingTicket(of callId: CallID) -> UInt64? { queues[callId]?.last?.ticket }

  package mutating func hold(_ item: Item, for callId: CallID, until ticket: UInt64) {
    order += 1
    let wait = max(ticket, pendingTicket(of: callId) ?? 0)
    queues[callId, default: []].append((wait, order, item))
  }

  /// Everything whose ticket is now written, in the order it was held.
  package mutating func release(upTo committed: UInt64) -> [Item] {
    var released: [(order: UInt64, item: Item)] = []
    for (callId, queue) in queues {
      let ready = queue.prefix { $0.ticket <= committed }
      guard !ready.isEmpty else { continue }
      released += ready.map { ($0.order, $0.item) }
      queues[callId] = ready.count == queue.count ? nil : Array(queue.dropFirst(ready.count))
    }
    return released.sorted { $0.order < $1.order }.map(\.item)
  }

  package init() {
  }
}
