import DialtoneProtocol
import Foundation

/// Persists every ended call. Writes run off the hub, in order, so signaling never waits on disk.
final class CallRecorder: CallEffectSink {
  private let writes: AsyncStream<CallRecord>.Continuation
  private let done: Task<Void, Never>

  init(store: any CallStore, log: Log) {
    let (stream, continuation) = AsyncStream<CallRecord>.makeStream()
    writes = continuation
    done = Task {
      for await record in stream {
        do { try await store.save(record) } catch { log.error("could not save call \(record.callId): \(error)") }
      }
    }
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    if case .ended(let record) = event { writes.yield(record) }
  }

  /// Waits until every record handed over so far is written.
  func flush() async {
    writes.finish()
    await done.value
  }
}
