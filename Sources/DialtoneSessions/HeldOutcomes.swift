import DialtoneProtocol
import DialtoneSupport

/// What the hub holds back until the journal has written it: per call, outcomes in the order
/// they were made, each behind a journal ticket. An outcome that writes nothing still waits for
/// the ones of its call before it, so a call's messages are never seen out of order (the
/// caller never gets the callee's candidates before its `accept`).
///
/// Outcomes are kept by the ticket they wait for. The journal hands tickets out in increasing
/// order, and an outcome waits for its own (then the newest) or for one its call already waits
/// for, so the tickets waited for queue up in order as they first appear: a commit takes from
/// the front of that queue and costs what it releases, not a look at every call with something
/// held.
package struct HeldOutcomes<Item> {
  private struct Held {
    let order: UInt64
    let callId: CallID
    let item: Item
  }

  /// The outcomes waiting for each ticket, in the order they were held.
  private var byTicket: [UInt64: [Held]] = [:]
  /// The keys of `byTicket`, oldest first.
  private var tickets = FIFOQueue<UInt64>()
  /// Per call with outcomes held: the ticket its latest waits for, and how many are held.
  private var calls: [CallID: (ticket: UInt64, count: Int)] = [:]
  private var order: UInt64 = 0

  package var isEmpty: Bool { calls.isEmpty }

  /// The ticket an outcome of `callId` that writes nothing must wait for, if any.
  package func pendingTicket(of callId: CallID) -> UInt64? { calls[callId]?.ticket }

  package mutating func hold(_ item: Item, for callId: CallID, until ticket: UInt64) {
    order += 1
    let pending = calls[callId]
    let wait = max(ticket, pending?.ticket ?? 0)
    // A ticket not yet waited for is the journal's newest. Were it older than the queue's last,
    // it would only leave later than it could, never earlier: a commit stops at the first ticket
    // it has not reached.
    if byTicket[wait] == nil { tickets.append(wait) }
    byTicket[wait, default: []].append(Held(order: order, callId: callId, item: item))
    calls[callId] = (wait, (pending?.count ?? 0) + 1)
  }

  /// Everything whose ticket is now written, in the order it was held.
  package mutating func release(upTo committed: UInt64) -> [Item] {
    var released: [Held] = []
    while let ticket = tickets.first, ticket <= committed {
      tickets.popFirst()
      released += byTicket.removeValue(forKey: ticket) ?? []
    }
    guard !released.isEmpty else { return [] }
    for held in released {
      guard let pending = calls[held.callId] else { continue }
      calls[held.callId] = pending.count > 1 ? (pending.ticket, pending.count - 1) : nil
    }
    // Outcomes of different tickets can interleave (one that writes nothing waits for an older
    // ticket than an outcome of another call held before it).
    if released.count > 1 { released.sort { $0.order < $1.order } }
    // A closure, not the key path `\.item`: in this generic code (the hub's `Output` is not
    // specialized into it) a key path is made at run time at every call (`swift_getKeyPath`,
    // ~10,000 instructions a commit: 1 % of the server's in `bench/callgrind_relay.sh`).
    return released.map { $0.item }
  }

  package init() {
  }
}
