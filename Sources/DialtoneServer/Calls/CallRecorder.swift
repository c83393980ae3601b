import DialtoneProtocol
import Foundation

/// Persists every ended call, off the hub so that signaling never waits on disk. Records that
/// end within `batchWindow` of each other are written in one transaction: a SQLite WAL commit
/// costs several page writes whatever it holds, and at a hundred calls a second one commit per
/// call was most of the server's disk work. `flush()` writes whatever is pending.
final class CallRecorder: CallEffectSink, @unchecked Sendable {
  // @unchecked: `pending`, `scheduled` and `writer` are only touched under `lock`.
  private let store: any CallStore
  private let log: Log
  private let batchWindow: Duration
  private let lock = NSLock()
  private var pending: [CallRecord] = []
  private var scheduled = false
  /// The latest batch write; each one waits for the one before, so records land in order.
  private var writer: Task<Void, Never>?

  init(store: any CallStore, log: Log, batchWindow: Duration = .milliseconds(50)) {
    self.store = store
    self.log = log
    self.batchWindow = batchWindow
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    guard case .ended(let record) = event else { return }
    lock.withLock {
      pending.append(record)
      guard !scheduled else { return }
      scheduled = true
      let previous = writer
      let window = batchWindow
      writer = Task { [self] in
        await previous?.value
        try? await Task.sleep(for: window)
        await writePending()
      }
    }
  }

  /// Writes every record handed over so far, without waiting for the window (shutdown).
  func flush() async {
    let last = lock.withLock { writer }
    last?.cancel()  // ends its wait at once; it still writes, in order
    await last?.value
    await writePending()
  }

  private func writePending() async {
    let batch = lock.withLock { () -> [CallRecord] in
      scheduled = false
      defer { pending = [] }
      return pending
    }
    guard !batch.isEmpty else { return }
    do {
      try await store.save(batch)
    } catch {
      log.error("could not save \(batch.count) call(s) (\(batch.map(\.callId).joined(separator: ", "))): \(error)")
    }
  }
}
