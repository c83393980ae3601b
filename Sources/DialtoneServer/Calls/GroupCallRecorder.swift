import DialtoneProtocol
import DialtoneSupport
import Foundation

/// Persists every ended group call, off the hub. Group calls end far less often than 1:1
/// calls, so each is written on its own, in order.
final class GroupCallRecorder: CallEffectSink, Sendable {
  private let store: any GroupCallStore
  private let log: Log
  private let writer = Locked<Task<Void, Never>?>(nil)

  init(store: any GroupCallStore, log: Log) {
    self.store = store
    self.log = log
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    guard case .groupEnded(let record) = event else { return }
    writer.withLock { last in
      let previous = last
      last = Task { [store, log] in
        await previous?.value
        do {
          try await store.saveGroupCall(record)
        } catch {
          log.error("cannot save group call \(record.callId): \(error)")
        }
      }
    }
  }

  /// Waits for every record handed over so far.
  func flush() async {
    await writer.withLock { $0 }?.value
  }
}
