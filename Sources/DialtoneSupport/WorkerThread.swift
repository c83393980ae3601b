import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#endif

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
      Self.nameCurrentThread(name)
      body()
      finished.signal()
    }
    thread.name = name
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
  }

  /// Names the calling thread as the system sees it (`top -H`, `perf`, /proc).
  private static func nameCurrentThread(_ name: String) {
    #if canImport(Glibc)
      // On Linux a new thread starts with its creator's name (often a libdispatch worker's), and
      // neither a name given to `Thread` before `start` nor setting `Thread.current.name` to
      // that same name from inside reliably replaces it: set the system's name directly. Linux
      // takes at most 15 bytes. (Glibc's `pthread_setname_np` is not visible to Swift; this is
      // what it does.)
      let fd = open("/proc/thread-self/comm", O_WRONLY)
      guard fd >= 0 else { return }
      let bytes = Array(name.utf8.prefix(15))
      _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      close(fd)
    #else
      Thread.current.name = name
    #endif
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
