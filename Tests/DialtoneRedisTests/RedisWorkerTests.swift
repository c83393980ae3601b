import DialtoneCluster
import DialtoneRedis
import DialtoneSupport
import Foundation
import Testing

@Suite struct RedisWorkerBehaviour {
  /// A wake asked for an instant runs the worker's action on the worker's own thread (no timer
  /// thread), between its jobs, once per instant asked.
  @Test func aWakeRunsItsActionOnTheWorkersThreadBetweenJobs() {
    let worker = RedisWorker(name: "test-wakes", maxQueued: 16) { () throws(RedisError) in
      throw .connectionFailed(message: "no Redis in this test")
    }
    let seen = Locked<[String]>([])
    let done = DispatchSemaphore(value: 0)
    let threadName: @Sendable () -> String = { Thread.current.name ?? "" }
    worker.onWake {
      seen.withLock { $0.append("wake on \(threadName())") }
      done.signal()
    }
    // The wake is asked while the first job runs, already due: it runs once that job is done,
    // whenever the worker's thread gets the core (a wake a few milliseconds ahead could fall
    // due before a loaded machine ran the first job, and then rightly go first).
    let running = DispatchSemaphore(value: 0)
    let finish = DispatchSemaphore(value: 0)
    worker.submit { _ in
      seen.withLock { $0.append("job on \(threadName())") }
      running.signal()
      _ = finish.wait(timeout: .now() + 10)
    }
    #expect(running.wait(timeout: .now() + 10) == .success)
    worker.wake(at: .now)
    finish.signal()
    #expect(done.wait(timeout: .now() + 10) == .success)
    worker.submit { _ in
      seen.withLock { $0.append("job on \(threadName())") }
      done.signal()
    }
    #expect(done.wait(timeout: .now() + 10) == .success)
    #expect(seen.current == ["job on test-wakes", "wake on test-wakes", "job on test-wakes"])
    worker.close(waitingUpTo: .seconds(10))
  }
}
