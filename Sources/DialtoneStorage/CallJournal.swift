import DialtoneCalls
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Writes the router's live-call changes to a `LiveCallStore` on a thread of its own, with
/// group commit: whatever is submitted while one transaction is being written goes into the
/// next, so a burst of calls costs a few commits rather than one each, and an idle server
/// commits at once. Each `submit` returns a ticket; `onCommit` reports the highest ticket that
/// is on disk, and the hub holds back the outcome behind a ticket until then.
package final class CallJournal: Sendable {
  private let store: any LiveCallStore
  private let log: Log
  /// Cluster mode: this node's epochs of its calls, which fence every write.
  private let fence: (any LiveCallFence)?
  /// Changes waiting for the next transaction and the tickets given (`JournalQueue`).
  private let queue = JournalQueue()
  private let writer = Locked<WorkerThread?>(nil)

  package init(store: any LiveCallStore, log: Log, fence: (any LiveCallFence)? = nil) {
    self.store = store
    self.log = log
    self.fence = fence
  }

  package static let threadName = "call-journal"

  /// Starts the writing thread. `onCommit` is called on it after each transaction.
  package func start(onCommit: @escaping @Sendable (UInt64) -> Void) {
    // At most 15 characters: Linux refuses a longer thread name, and the thread would go by its
    // creator's (a libdispatch worker's) in `top -H` and `perf`.
    let thread = WorkerThread(name: Self.threadName) { [self] in run(onCommit) }
    writer.withLock { $0 = thread }
  }

  /// Queues `changes` for the next transaction; the ticket is reported by `onCommit` once they
  /// are written.
  package func submit(_ changes: [LiveCallChange]) -> UInt64 { queue.put(changes) }

  /// Waits until everything submitted so far is written and reported, then stops the thread.
  package func close() {
    queue.close()
    writer.current?.wait()
  }

  /// How long a batch is retried while the store cannot be written (a database restarting):
  /// the outcomes behind it wait meanwhile, then go on unwritten.
  package static let retryWindow: Duration = .seconds(30)

  /// Writes a batch, retrying (0.1 s, doubling to 2 s) for `retryWindow` while the store fails:
  /// what was acknowledged is then on disk once the database is back. Past the window the calls
  /// go on in memory, and only a restart before they end would lose them.
  private func write(_ batch: [LiveCallChange]) {
    let started = ContinuousClock.now
    var pause = Duration.milliseconds(100)
    while true {
      do {
        try write(batch, fencedBy: fence)
        if pause > .milliseconds(100) { log.info("the live-call store answers again") }
        return
      } catch {
        if ContinuousClock.now - started >= Self.retryWindow {
          log.error(
            "could not store \(batch.count) live-call change(s) for \(Self.retryWindow): \(error); going on without")
          return
        }
        if pause == .milliseconds(100) {
          log.error("could not store \(batch.count) live-call change(s): \(error); retrying until the store answers")
        }
        Thread.sleep(forTimeInterval: pause.seconds)
        pause = min(pause * 2, .seconds(2))
      }
    }
  }

  /// Writes a batch, fenced by this node's epochs in a cluster: the changes of a call another
  /// node took over meanwhile are refused (and said), not written over the new owner's.
  private func write(_ batch: [LiveCallChange], fencedBy fence: (any LiveCallFence)?) throws {
    guard let fence else { return try store.write(batch) }
    var epochs: [CallID: Int64] = [:]
    for change in batch { if let callId = change.fencedCallId { epochs[callId] = fence.epoch(of: callId) } }
    for callId in try store.write(batch, fencedBy: epochs).sorted() {
      log.warning(
        "refused a write of call \(callId) at epoch \(epochs[callId] ?? 1): another node took it over", callId: callId)
    }
  }

  private func run(_ onCommit: @Sendable (UInt64) -> Void) {
    while let batch = queue.takeAll() {
      write(batch.changes)
      // Reported before `close` can return: what the hub does with the outcomes it held then
      // comes before whatever the closer does next.
      onCommit(batch.upTo)
    }
  }
}

/// The journal's queue: the submitted changes in order, and the last ticket given, under one
/// lock. The hub's thread appends and wakes the journal's thread only when that thread sleeps,
/// and after letting go of the lock: woken under it, the journal's thread would run at once into
/// the lock still held and sleep again on it (a second futex wait and wake, and two more context
/// switches, for every transaction). The journal's thread takes everything at once, swapping the
/// array out, so that the hub's thread never waits on the lock longer than that swap.
private final class JournalQueue: @unchecked Sendable {
  // @unchecked: every stored property but `condition` is only touched under `condition`.
  private let condition = NSCondition()
  private var changes: [LiveCallChange] = []
  /// The last ticket given, the last one queued (they differ once closed) and the last one taken.
  private var given: UInt64 = 0
  private var queued: UInt64 = 0
  private var taken: UInt64 = 0
  private var closed = false
  private var sleeping = false

  /// Appends `batch` for the next transaction; its ticket. Once closed, the batch is dropped and
  /// its ticket is never reported (as when the server stops).
  func put(_ batch: [LiveCallChange]) -> UInt64 {
    condition.lock()
    given += 1
    let ticket = given
    if !closed {
      changes.append(contentsOf: batch)
      queued = ticket
    }
    let wake = sleeping && !closed
    if wake { sleeping = false }
    condition.unlock()
    if wake { condition.signal() }
    return ticket
  }

  /// Everything queued since the last call, with the ticket of its last batch, sleeping until
  /// there is something; nil once closed and drained.
  func takeAll() -> (changes: [LiveCallChange], upTo: UInt64)? {
    condition.lock()
    defer { condition.unlock() }
    while queued == taken && !closed {
      sleeping = true
      condition.wait()
    }
    sleeping = false
    guard queued != taken else { return nil }
    taken = queued
    var batch: [LiveCallChange] = []
    swap(&batch, &changes)
    return (batch, taken)
  }

  /// Takes no more; the journal's thread drains what is queued, then stops.
  func close() {
    condition.lock()
    closed = true
    condition.unlock()
    condition.broadcast()
  }
}
