import DialtonePostgres
import DialtoneTestSupport
import Foundation
import Testing

extension PostgresTests {
  @Suite struct ThreadPool {
    @Test func jobsRunOnThePoolsOwnThreadsWithALiveConnection() async throws {
      let pool = PostgresThreadPool(
        PostgresConfiguration(url: try SharedPostgres.server().freshSchema()), threads: 2, name: "pool-test")
      defer { pool.close() }
      let answers = try await withThrowingTaskGroup(of: (String?, Int64?).self) { group in
        for n in 0..<20 {
          group.addTask {
            try await pool.run { connection in
              (Thread.current.name, try connection.query("SELECT $1::bigint", [.int64(Int64(n))]).first?.int64(0))
            }
          }
        }
        return try await group.reduce(into: [(String?, Int64?)]()) { $0.append($1) }
      }
      #expect(Set(answers.compactMap(\.1)) == Set((0..<20).map(Int64.init)))
      #expect(answers.allSatisfy { $0.0?.hasPrefix("pool-test-") == true })
    }

    @Test func aFullQueueRefusesAtOnceAndAClosedPoolRefusesEverything() async throws {
      let pool = PostgresThreadPool(
        PostgresConfiguration(url: try SharedPostgres.server().freshSchema()), threads: 1, maxQueued: 1)
      let started = DispatchSemaphore(value: 0)
      let release = DispatchSemaphore(value: 0)
      let busy = Task {
        try await pool.run { _ in
          started.signal()
          release.wait()
        }
      }
      var running = false
      for _ in 0..<500 where !running {
        running = started.wait(timeout: .now()) == .success
        if !running { try await Task.sleep(for: .milliseconds(10)) }
      }
      #expect(running)
      // The thread is busy: one of two more jobs waits in the queue, the other finds it full.
      let outcomes = Outcomes()
      let jobs = (0..<2).map { _ in
        Task {
          do {
            outcomes.add(.success(try await pool.run { try $0.query("SELECT 7").first?.int64(0) }))
          } catch {
            outcomes.add(.failure(error))
          }
        }
      }
      for _ in 0..<500 where outcomes.all.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
      #expect(outcomes.all.map { (try? $0.get()) == nil } == [true])
      let refusals = outcomes.all.compactMap { outcome -> PostgresError? in
        guard case .failure(let error) = outcome else { return nil }
        return error as? PostgresError
      }
      #expect(refusals == [.poolExhausted(maxWaiters: 1)])
      release.signal()
      try await busy.value
      for job in jobs { await job.value }
      #expect(outcomes.all.compactMap { try? $0.get() } == [7])

      pool.close()
      await #expect(throws: PostgresError.poolClosed) { try await pool.run { _ in } }
    }

    @Test func aServerThatCannotBeReachedFailsTheJob() async throws {
      let url = "postgres://dialtone@127.0.0.1:\(try LoopbackListener.freePort())/postgres"
      let pool = PostgresThreadPool(PostgresConfiguration(url: url), threads: 1)
      defer { pool.close() }
      let error = await #expect(throws: PostgresError.self) { try await pool.run { _ in } }
      guard case .connectionFailed = error else {
        Issue.record("\(String(describing: error))")
        return
      }
    }
  }
}

/// What finished jobs came to, in the order they finished.
private final class Outcomes: @unchecked Sendable {
  // @unchecked: `results` is only read or written under `lock`.
  private let lock = NSLock()
  private var results: [Result<Int64?, any Error>] = []

  func add(_ result: Result<Int64?, any Error>) { lock.withLock { results.append(result) } }
  var all: [Result<Int64?, any Error>] { lock.withLock { results } }
}
