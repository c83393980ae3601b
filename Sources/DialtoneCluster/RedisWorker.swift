import DialtoneRedis
import DialtoneSupport
import Foundation

/// A thread of its own with a Redis connection of its own, running jobs one at a time in the
/// order they were submitted: a node's cluster traffic keeps its order (two messages for one
/// device arrive as sent) and never blocks the thread that submits it. The queue is bounded:
/// `submit` refuses a job when `maxQueued` wait (the caller counts and reports it) rather than
/// letting a stalled Redis grow memory without end. A job that fails on a broken connection
/// gets the error; the next job reconnects.
public final class RedisWorker: Sendable {
  public typealias Job = @Sendable ((any RedisClient)?) -> Void

  private let queue: BlockingQueue<Job>
  private let thread: WorkerThread

  /// `connect` opens the connection (again after a failure); a job gets nil while Redis cannot
  /// be reached, and decides what that means for its work.
  public init(
    name: String, maxQueued: Int, connect: @escaping @Sendable () throws(RedisError) -> any RedisClient
  ) {
    let queue = BlockingQueue<Job>(capacity: maxQueued)
    self.queue = queue
    thread = WorkerThread(name: name) { Self.work(queue, connect) }
  }

  deinit { queue.close() }

  /// Whether the job was queued (false: the queue is full, or the worker stopped).
  @discardableResult
  public func submit(_ job: @escaping Job) -> Bool { queue.put(job) == nil }

  /// Runs the jobs already queued, then stops the thread.
  public func close() { queue.close() }

  /// `close`, then waits up to `wait` for the queued jobs to have run: a process that exits while
  /// one still runs would tear libraries down under it. Whether they all ran in time.
  @discardableResult
  public func close(waitingUpTo wait: Duration) -> Bool {
    queue.close()
    return thread.wait(upTo: wait)
  }

  public var queued: Int { queue.count }

  private static func work(_ queue: BlockingQueue<Job>, _ connect: @Sendable () throws(RedisError) -> any RedisClient) {
    var connection: (any RedisClient)?
    while let job = queue.take() {
      if connection == nil || connection?.isOpen == false {
        connection?.close()
        connection = try? connect()
      }
      job(connection)
    }
    connection?.close()
  }
}
