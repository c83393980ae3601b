import DialtoneRedis
import DialtoneSupport
import Foundation

/// Runs one step after another on a thread of its own, over one Redis connection that it opens
/// again whenever it is lost, until `stop`. Blocking Redis calls (XREAD, a heartbeat on a slow
/// link) then delay nothing else. A failure is logged once until a step succeeds again, and the
/// next try waits `retryPause` so that a Redis that is down is not hammered.
package final class RedisLoopThread: Sendable {
  private let name: String
  private let redis: RedisConfiguration
  private let retryPause: Duration
  private let log: Log
  private let running = Locked(false)
  /// The loop's thread (`stop` waits for it: a process that exits while a step still runs would
  /// tear libraries down under it).
  private let thread = Locked<WorkerThread?>(nil)
  /// Signalled by `stop`, to end a `pause` early.
  private let wake = DispatchSemaphore(value: 0)

  package init(name: String, redis: RedisConfiguration, retryPause: Duration, log: Log) {
    self.name = name
    self.redis = redis
    self.retryPause = retryPause
    self.log = log
  }

  /// `step` gets the state the previous step left (the thread owns it) and the open connection.
  package func start<State: Sendable>(
    _ initial: State, failing: String, recovered: String,
    step: @escaping @Sendable (inout State, any RedisClient) throws -> Void
  ) {
    running.withLock { $0 = true }
    let started = WorkerThread(name: name) { [self] in
      run(initial, failing: failing, recovered: recovered, step: step)
    }
    thread.withLock { $0 = started }
  }

  /// Ends the loop after its current step, and waits up to `wait` for that step to end.
  package func stop(waitingUpTo wait: Duration = .seconds(3)) {
    let wasRunning = running.withLock { running in
      defer { running = false }
      return running
    }
    guard wasRunning else { return }
    wake.signal()
    thread.current?.wait(upTo: wait)
  }

  /// Waits between steps (a step calls it); `stop` ends the wait.
  package func pause(_ duration: Duration) {
    guard duration > .zero, running.current else { return }
    _ = wake.wait(timeout: .now() + duration.seconds)
  }

  private func run<State>(
    _ initial: State, failing: String, recovered: String, step: (inout State, any RedisClient) throws -> Void
  ) {
    var state = initial
    var connection: (any RedisClient)?
    var failed = false
    while running.current {
      do {
        let open: any RedisClient
        if let connection, connection.isOpen {
          open = connection
        } else {
          connection?.close()
          open = try redis.open()
          connection = open
        }
        try step(&state, open)
        if failed {
          log.info(recovered)
          failed = false
        }
      } catch {
        if !failed { log.error("\(failing): \(error); retrying") }
        failed = true
        connection?.close()
        connection = nil
        pause(retryPause)
      }
    }
    connection?.close()
  }
}
