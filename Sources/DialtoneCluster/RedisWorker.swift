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
  /// What runs on the worker's thread, between jobs, when the instant `wake(at:)` asked passes.
  private let alarm: Locked<(@Sendable () -> Void)?>
  /// Jobs taken from the queue so far (tests: what went through it).
  private let taken: Locked<Int>

  /// `connect` opens the connection (again after a failure); a job gets nil while Redis cannot
  /// be reached, and decides what that means for its work.
  public init(
    name: String, maxQueued: Int, connect: @escaping @Sendable () throws(RedisError) -> any RedisClient
  ) {
    let queue = BlockingQueue<Job>(capacity: maxQueued)
    let alarm = Locked<(@Sendable () -> Void)?>(nil)
    let taken = Locked(0)
    self.queue = queue
    self.alarm = alarm
    self.taken = taken
    thread = WorkerThread(name: name) { Self.work(queue, alarm, taken, connect) }
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

  /// How many jobs the worker has taken from its queue (tests).
  public var jobsTaken: Int { taken.current }

  /// `action` runs on the worker's thread whenever an instant asked by `wake(at:)` passes.
  public func onWake(_ action: @escaping @Sendable () -> Void) { alarm.withLock { $0 = action } }

  /// Runs the `onWake` action at `instant` (or at an earlier instant already asked), on the
  /// worker's thread: a timer for work that ends in a job here anyway (write-behind's batch
  /// window), without a timer thread's wake and a hand-off to this one.
  public func wake(at instant: ContinuousClock.Instant) { queue.wake(at: instant) }

  private static func work(
    _ queue: BlockingQueue<Job>, _ alarm: Locked<(@Sendable () -> Void)?>, _ taken: Locked<Int>,
    _ connect: @Sendable () throws(RedisError) -> any RedisClient
  ) {
    var connection: (any RedisClient)?
    loop: while true {
      switch queue.takeOrDeadline() {
      case .item(let job):
        taken.withLock { $0 += 1 }
        if connection == nil || connection?.isOpen == false {
          connection?.close()
          connection = try? connect()
        }
        job(connection)
      case .deadline:
        alarm.current?()
      case .closed:
        break loop
      }
    }
    connection?.close()
  }
}
