#if canImport(Glibc)
  import Glibc
#endif

/// One descriptor held back so that, at EMFILE/ENFILE, the listener can still accept a pending
/// connection and close it at once: without a free slot, accept() fails and the client waits in
/// the backlog for a descriptor that may never come.
struct DescriptorReserve {
  private var fd: Int32 = -1

  init() { reacquire() }

  var isHeld: Bool { fd >= 0 }

  /// Frees the slot for one accept().
  mutating func release() {
    guard fd >= 0 else { return }
    close(fd)
    fd = -1
  }

  /// Takes a slot back; fails quietly when another thread took it first (retried next episode).
  mutating func reacquire() {
    guard fd < 0 else { return }
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
  }
}
