import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneServer

/// Records every batch it is asked to save.
private actor BatchLog: CallStore {
  private(set) var batches: [[CallID]] = []
  func save(_ records: [CallRecord]) async throws { batches.append(records.map(\.callId)) }
  func history(of userId: String, limit: Int, before cursor: HistoryCursor?) async throws -> [CallRecord] { [] }
}

@Suite struct CallRecorderTests {
  private let log = Log(level: .error, subsystem: "test")

  private func ended(_ id: CallID) -> CallEvent {
    .ended(
      CallRecord(
        callId: id, callerId: "alice", calleeId: "bob", video: false, createdAt: 0, endedAt: 1, endReason: .hangup))
  }

  @Test func callsEndingTogetherShareOneTransaction() async throws {
    let store = BatchLog()
    let recorder = CallRecorder(store: store, log: log, batchWindow: .milliseconds(20))
    for id in ["c1", "c2", "c3"] { recorder.handle(ended(id), connectedDevices: []) }
    var written: [[CallID]] = []
    for _ in 0..<1000 where written.isEmpty {
      try await Task.sleep(for: .milliseconds(5))
      written = await store.batches
    }
    #expect(written == [["c1", "c2", "c3"]])
    recorder.handle(ended("c4"), connectedDevices: [])
    await recorder.flush()
    #expect(await store.batches == [["c1", "c2", "c3"], ["c4"]])
  }

  @Test func flushWritesAtOnceWithoutWaitingForTheWindow() async throws {
    let store = BatchLog()
    // A window far longer than any test: only flush() can write these in time.
    let recorder = CallRecorder(store: store, log: log, batchWindow: .seconds(3600))
    for id in ["c1", "c2"] { recorder.handle(ended(id), connectedDevices: []) }
    #expect(await store.batches.isEmpty)
    await recorder.flush()
    #expect(await store.batches == [["c1", "c2"]])
  }
}
