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
  /// Changes in the order they were submitted, each batch with its ticket.
  private let queue = BlockingQueue<(changes: [LiveCallChange], ticket: UInt64)>()
  /// The last ticket given; taken and queued under one lock, so tickets queue in order.
  private let submitted = Locked<UInt64>(0)
  private let writer = Locked<WorkerThread?>(nil)

  package init(store: any LiveCallStore, log: Log, fence: (any LiveCallFence)? = nil) {
    self.store = store
    self.log = log
    self.fence = fence
  }

  /// Starts the writing thread. `onCommit` is called on it after each transaction.
  package func start(onCommit: @escaping @Sendable (UInt64) -> Void) {
    let thread = WorkerThread(name: "dialtone-journal") { [self] in run(onCommit) }
    writer.withLock { $0 = thread }
  }

  /// Queues `changes` for the next transaction; the ticket is reported by `onCommit` once they
  /// are written.
  package func submit(_ changes: [LiveCallChange]) -> UInt64 {
    submitted.withLock { last in
      last += 1
      queue.put((changes, last))
      return last
    }
  }

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
    while true {
      let batches = queue.takeAll()
      guard let upTo = batches.last?.ticket else { return }
      write(batches.flatMap(\.changes))
      // Reported before `close` can return: what the hub does with the outcomes it held then
      // comes before whatever the closer does next.
      onCommit(upTo)
    }
  }
}
