#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#endif

/// Wakes a thread that sleeps in `poll`: that thread polls `descriptor` for reading and, once
/// awake, calls `drain`; any thread calls `wake`. Both ends are non-blocking: a full pipe already
/// wakes the sleeper, so a waker never blocks on it.
public struct WakePipe: Sendable {
  /// The end the sleeping thread polls.
  public let descriptor: Int32
  private let writeEnd: Int32

  /// Nil when the process has no descriptors left (`errno` says why).
  public init?() {
    var ends: [Int32] = [-1, -1]
    guard pipe(&ends) == 0 else { return nil }
    for end in ends { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
    descriptor = ends[0]
    writeEnd = ends[1]
  }

  public func wake() {
    var byte: UInt8 = 1
    _ = write(writeEnd, &byte, 1)
  }

  /// Empties the pipe. Wakers write a byte per batch, so a short read means it is empty (no
  /// extra call to learn it).
  public func drain() {
    var buffer = [UInt8](repeating: 0, count: 256)
    while read(descriptor, &buffer, buffer.count) == buffer.count {}
  }

  /// Closes both ends: once, by the owner, after the sleeping thread is done with it.
  public func close() {
    #if canImport(Darwin)
      _ = Darwin.close(descriptor)
      _ = Darwin.close(writeEnd)
    #else
      _ = Glibc.close(descriptor)
      _ = Glibc.close(writeEnd)
    #endif
  }
}
