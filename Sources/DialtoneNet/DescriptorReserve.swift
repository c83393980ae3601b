#if canImport(Glibc)
  import Glibc
#endif

/// Descriptors held back (`/dev/null`) so that their numbers can be freed at the moment they are
/// needed:
/// - a listener's one: at EMFILE/ENFILE it can still accept a pending connection and close it at
///   once; without a free slot, accept() fails and the client waits in the backlog for a
///   descriptor that may never come;
/// - a network loop's cushion (`ServiceLoop`): opened before its context, so that their numbers
///   are below the context's event pipe, and given back just before the context goes. Debian
///   12's lws 4.1.6 on libuv closes that pipe (an eventfd) twice as a context goes (fixed upstream
///   as warmcat/libwebsockets#2873): a descriptor another thread opens in between would take the
///   freed number (new descriptors take the lowest free one) and be closed under it. While the
///   cushion's lower numbers are free, those opens land on them instead.
struct DescriptorReserve {
  private let count: Int
  private var descriptors: [Int32] = []

  init(count: Int = 1) {
    self.count = max(1, count)
    reacquire()
  }

  var isHeld: Bool { !descriptors.isEmpty }

  /// Frees the slots; only the first call after an acquisition closes anything.
  mutating func release() {
    for fd in descriptors { close(fd) }
    descriptors.removeAll()
  }

  /// Takes the slots back; a slot another thread took first is retried at the next call (a
  /// smaller reserve still helps, and nothing else depends on it).
  mutating func reacquire() {
    while descriptors.count < count {
      let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else { return }
      descriptors.append(fd)
    }
  }
}
