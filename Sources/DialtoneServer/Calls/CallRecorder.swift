import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Persists every ended call, off the hub so that signaling never waits on disk. Records that
/// end within `batchWindow` of each other are written in one transaction: a SQLite WAL commit
/// costs several page writes whatever it holds, and at a hundred calls a second one commit per
/// call was most of the server's disk work. `flush()` writes whatever is pending.
final class CallRecorder: CallEffectSink, Sendable {
  private let store: any CallStore
  private let log: Log
  private let batchWindow: Duration
  private struct Queue: Sendable {
    var pending: [CallRecord] = []
    var scheduled = false
    /// The latest batch write; each one waits for the one before, so records land in order.
    var writer: Task<Void, Never>?
  }
  private let queue = Locked(Queue())

  init(store: any CallStore, log: Log, batchWindow: Duration = .milliseconds(50)) {
    self.store = store
    self.log = log
    self.batchWindow = batchWindow
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    guard case .ended(let record) = event else { return }
    queue.withLock { queue in
      queue.pending.append(record)
      guard !queue.scheduled else { return }
      queue.scheduled = true
      let previous = queue.writer
      let window = batchWindow
      queue.writer = Task { [self] in
        await previous?.value
        try? await Task.sleep(for: window)
        await writePending()
      }
    }
  }

  /// Writes every record handed over so far, without waiting for the window (shutdown).
  func flush() async {
    let last = queue.withLock { $0.writer }
    last?.cancel()  // ends its wait at once; it still writes, in order
    await last?.value
    await writePending()
  }

  private func writePending() async {
    let batch: [CallRecord] = queue.withLock { queue in
      queue.scheduled = false
      defer { queue.pending = [] }
      return queue.pending
    }
    guard !batch.isEmpty else { return }
    do {
      try await store.save(batch)
    } catch {
      log.error("could not save \(batch.count) call(s) (\(batch.map(\.callId).joined(separator: ", "))): \(error)")
    }
  }
}
