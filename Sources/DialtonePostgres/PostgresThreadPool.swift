import DialtoneSupport
import Foundation

/// Runs blocking libpq work on threads of its own, so that a slow or vanished server never holds
/// one of the few threads of Swift's cooperative pool. Each thread keeps one connection, opened
/// for its first job and opened again when it was lost. A job that finds the queue full fails
/// at once (`poolExhausted`) rather than wait without bound.
public final class PostgresThreadPool: Sendable {
  /// A job: run with the thread's connection, or told why there is none.
  typealias Job = @Sendable (Result<PostgresConnection, PostgresError>) -> Void

  public let threadCount: Int
  public let maxQueued: Int
  private let queue: BlockingQueue<Job>

  public init(_ configuration: PostgresConfiguration, threads: Int = 4, maxQueued: Int = 256, name: String = "postgres")
  {
    threadCount = max(1, threads)
    self.maxQueued = max(1, maxQueued)
    let queue = BlockingQueue<Job>(capacity: self.maxQueued)
    self.queue = queue
    for index in 0..<threadCount {
      _ = WorkerThread(name: "\(name)-\(index)") { PostgresThreadPool.work(queue, configuration) }
    }
  }

  deinit { close() }

  /// Runs `body` on one of the pool's threads with that thread's connection, suspending the
  /// caller (not blocking it) until it is done. A connection that cannot be opened fails the job
  /// with `connectionFailed`.
  public func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
      let refused = queue.put { connection in
        switch connection {
        case .success(let connection): continuation.resume(with: Result { try body(connection) })
        case .failure(let error): continuation.resume(throwing: error)
        }
      }
      switch refused {
      case nil: break
      case .full: continuation.resume(throwing: PostgresError.poolExhausted(maxWaiters: maxQueued))
      case .closed: continuation.resume(throwing: PostgresError.poolClosed)
      }
    }
  }

  /// Runs `body` once on a new thread of its own: blocking work (connecting, migrating) for
  /// which no pool is kept.
  public static func detached<T: Sendable>(name: String = "postgres", _ body: @escaping @Sendable () throws -> T)
    async throws -> T
  {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
      _ = WorkerThread(name: name) { continuation.resume(with: Result { try body() }) }
    }
  }

  /// Fails the queued jobs with `poolClosed`; the threads finish the jobs they run, then exit
  /// and close their connections.
  public func close() {
    for job in queue.closeNow() { job(.failure(.poolClosed)) }
  }

  private static func work(_ queue: BlockingQueue<Job>, _ configuration: PostgresConfiguration) {
    var connection: PostgresConnection?
    while let job = queue.take() {
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
