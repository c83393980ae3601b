import Foundation

/// Runs blocking libpq work on threads of its own, so that a slow or vanished server never holds
/// one of the few threads of Swift's cooperative pool. Each thread keeps one connection, opened
/// for its first job and opened again when it was lost. A job that finds the queue full fails
/// at once (`poolExhausted`) rather than wait without bound.
public final class PostgresThreadPool: Sendable {
  public let threadCount: Int
  public let maxQueued: Int
  private let queue: PostgresJobQueue

  public init(_ configuration: PostgresConfiguration, threads: Int = 4, maxQueued: Int = 256, name: String = "postgres")
  {
    threadCount = max(1, threads)
    self.maxQueued = max(1, maxQueued)
    let queue = PostgresJobQueue(maxQueued: self.maxQueued)
    self.queue = queue
    for index in 0..<threadCount {
      // Named from inside: on Linux a name set before `start` does not reach the thread.
      let thread = Thread {
        Thread.current.name = "\(name)-\(index)"
        PostgresThreadPool.work(queue, configuration)
      }
      thread.start()
    }
  }

  deinit { queue.close() }

  /// Runs `body` on one of the pool's threads with that thread's connection, suspending the
  /// caller (not blocking it) until it is done. A connection that cannot be opened fails the job
  /// with `connectionFailed`.
  public func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
      let refused = queue.enqueue { connection in
        switch connection {
        case .success(let connection): continuation.resume(with: Result { try body(connection) })
        case .failure(let error): continuation.resume(throwing: error)
        }
      }
      if let refused { continuation.resume(throwing: refused) }
    }
  }

  /// Runs `body` once on a new thread of its own: blocking work (connecting, migrating) for
  /// which no pool is kept.
  public static func detached<T: Sendable>(name: String = "postgres", _ body: @escaping @Sendable () throws -> T)
    async throws -> T
  {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
      let thread = Thread {
        Thread.current.name = name
        continuation.resume(with: Result { try body() })
      }
      thread.start()
    }
  }

  /// Fails the queued jobs with `poolClosed`; the threads finish the jobs they run, then exit
  /// and close their connections.
  public func close() { queue.close() }

  private static func work(_ queue: PostgresJobQueue, _ configuration: PostgresConfiguration) {
    var connection: PostgresConnection?
    while let job = queue.next() {
      // A connection whose server went away, or left inside a transaction, is not reused.
      if let current = connection, !(current.isAlive && current.isReusable) {
        current.close()
        connection = nil
      }
      if connection == nil {
        do {
          connection = try PostgresConnection(configuration)
        } catch {
          job(.failure(error))
          continue
        }
      }
      if let connection { job(.success(connection)) }
    }
    connection?.close()
  }
}

/// The jobs waiting for a thread, first in first out.
final class PostgresJobQueue: @unchecked Sendable {
  // @unchecked: `jobs` and `closed` are only read or written under `condition`.
  typealias Job = @Sendable (Result<PostgresConnection, PostgresError>) -> Void

  private let condition = NSCondition()
  private var jobs: [Job] = []
  private var head = 0
  private var closed = false
  private let maxQueued: Int

  init(maxQueued: Int) { self.maxQueued = maxQueued }

  /// Nil when queued; otherwise why not.
  func enqueue(_ job: @escaping Job) -> PostgresError? {
    condition.lock()
    defer { condition.unlock() }
    if closed { return .poolClosed }
    guard jobs.count - head < maxQueued else { return .poolExhausted(maxWaiters: maxQueued) }
    jobs.append(job)
    condition.signal()
    return nil
  }

  /// The next job, waiting for one; nil once the queue is closed.
  func next() -> Job? {
    condition.lock()
    defer { condition.unlock() }
    while head == jobs.count && !closed { condition.wait() }
    guard head < jobs.count else { return nil }
    let job = jobs[head]
    head += 1
    if head == jobs.count {
      jobs.removeAll(keepingCapacity: true)
      head = 0
    }
    return job
  }

  func close() {
    condition.lock()
    closed = true
    let failed = jobs[head...]
    jobs = []
    head = 0
    condition.broadcast()
    condition.unlock()
    for job in failed { job(.failure(.poolClosed)) }
  }
}
