#if canImport(Glibc)
  import Glibc
#endif

/// Descriptors a network loop holds from before its context is created until just before the
/// context is destroyed, and then gives back.
///
/// Debian 12's lws 4.1.6 on libuv closes its event pipe (an eventfd) twice as a context goes:
/// once as the pipe is destroyed, again when libuv's close of its handle runs (fixed upstream
/// in 2024, warmcat/libwebsockets#2873). A descriptor another thread of the process opens in
/// between takes the freed number (new descriptors take the lowest free one) and is closed
/// under it: another loop's socket then makes libuv abort, a database file loses its handle.
/// These numbers are below the eventfd's (opened first) and free again during that window, so
/// the other threads' opens land on them; only more opens than the cushion holds, inside the
/// few microseconds between the two closes, could reach the eventfd's number.
struct DescriptorCushion {
  static let size = 8
  private var descriptors: [Int32] = []

  init() {
    for _ in 0..<Self.size {
      let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
      // Short of descriptors: a smaller cushion still helps, and nothing else depends on it.
      if fd >= 0 { descriptors.append(fd) }
    }
  }

  var isHeld: Bool { !descriptors.isEmpty }

  /// Frees the numbers; only the first call closes anything.
  mutating func release() {
    for fd in descriptors { close(fd) }
    descriptors.removeAll()
  }
}
