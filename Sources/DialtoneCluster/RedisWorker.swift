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
  public typealias Job = @Sendable (RedisConnection?) -> Void

  private let queue: JobQueue
  /// Signalled when the thread has run its last job (`close(waitingUpTo:)`).
  private let finished = DispatchSemaphore(value: 0)

  /// `connect` opens the connection (again after a failure); a job gets nil while Redis cannot
  /// be reached, and decides what that means for its work.
  public init(
    name: String, maxQueued: Int, connect: @escaping @Sendable () throws(RedisError) -> RedisConnection
  ) {
    let queue = JobQueue(maxQueued: max(1, maxQueued))
    self.queue = queue
    let finished = finished
    let thread = Thread {
      Self.work(queue, connect)
      finished.signal()
    }
    thread.name = name
    thread.start()
  }

  deinit { queue.close() }

  /// Whether the job was queued (false: the queue is full, or the worker stopped).
  @discardableResult
  public func submit(_ job: @escaping Job) -> Bool { queue.enqueue(job) }

  /// Runs the jobs already queued, then stops the thread.
  public func close() { queue.close() }

  /// `close`, then waits up to `wait` for the queued jobs to have run: a process that exits while
  /// one still runs would tear libraries down under it. Whether they all ran in time.
  @discardableResult
  public func close(waitingUpTo wait: Duration) -> Bool {
    queue.close()
    return finished.wait(timeout: .now() + wait.seconds) == .success
  }

  public var queued: Int { queue.count }

  private static func work(_ queue: JobQueue, _ connect: @Sendable () throws(RedisError) -> RedisConnection) {
    var connection: RedisConnection?
    while let job = queue.next() {
      if connection == nil || connection?.isOpen == false {
        connection?.close()
        connection = try? connect()
      }
      job(connection)
    }
    connection?.close()
  }
}

/// The worker's queue: a condition variable guards it (its thread sleeps on it between jobs).
private final class JobQueue: @unchecked Sendable {  // every field is guarded by `condition`
  private let condition = NSCondition()
  private var jobs: [RedisWorker.Job] = []
  private var head = 0
  private var closed = false
  private let maxQueued: Int

  init(maxQueued: Int) { self.maxQueued = maxQueued }

  var count: Int {
    condition.lock()
    defer { condition.unlock() }
    return jobs.count - head
  }

  func enqueue(_ job: @escaping RedisWorker.Job) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    guard !closed, jobs.count - head < maxQueued else { return false }
    jobs.append(job)
    condition.signal()
    return true
  }

  func next() -> RedisWorker.Job? {
    condition.lock()
    defer { condition.unlock() }
    while head == jobs.count && !closed { condition.wait() }
    guard head < jobs.count else { return nil }
    let job = jobs[head]
    head += 1
    if head > 64 && head * 2 > jobs.count {
      jobs.removeFirst(head)
      head = 0
    }
    return job
  }

  func close() {
    condition.lock()
    closed = true
    condition.broadcast()
    condition.unlock()
  }
}
