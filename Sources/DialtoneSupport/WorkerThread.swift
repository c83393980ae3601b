import Foundation

/// A thread of its own for blocking work (a database connection, a C library's loop): named,
/// started at once, and awaitable, so that a process waits for it before tearing libraries
/// down under it. The project's one kind of thread; what it runs usually sleeps on a
/// `BlockingQueue`.
public final class WorkerThread: Sendable {
  public let name: String
  private let finished = DispatchSemaphore(value: 0)

  public init(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    self.name = name
    let finished = finished
    let thread = Thread {
      // Named from inside too: on Linux a name set before `start` does not reach the system's
      // thread, and one set from inside can be lost when the thread runs before `start` returns.
      Thread.current.name = name
      body()
      finished.signal()
    }
    thread.name = name
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
  }

  /// Waits up to `limit` for the thread's work to end; whether it did.
  @discardableResult
  public func wait(upTo limit: Duration) -> Bool {
    let done = finished.wait(timeout: .now() + limit.seconds) == .success
    if done { finished.signal() }  // let other waiters through too
    return done
  }

  /// Waits for the thread's work to end, however long it takes.
  public func wait() {
    finished.wait()
    finished.signal()
  }
}
