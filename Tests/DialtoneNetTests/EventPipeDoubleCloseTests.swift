import DialtoneNet
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// lws 4.1.6 on libuv closes a context's event pipe twice as the context goes (a loop's
/// cushion, `DescriptorReserve`). Another thread opening descriptors one at a time, as a
/// server's listener or a database does, must never have one closed under it by a loop that
/// stops.
@Suite(.serialized) struct EventPipeDoubleCloseTests {
  private static let loops = 60
  private static let maxOpens = 20_000_000

  @Test func aLoopThatStopsNeverClosesAnotherThreadsDescriptor() async throws {
    let counts = Counts()
    var fillers: [Int32] = []
    defer { for fd in fillers { close(fd) } }

    for _ in 0..<Self.loops {
      // Holes below the new loop's descriptors would take the other thread's opens first and
      // hide the double close: fill them, so that the lowest free number is the loop's.
      fillers += Self.fillHoles()
      let client = try WebSocketClient()
      let churner = Thread {
        // One descriptor at a time, checked while held and when closed: EBADF means another
        // party closed it.
        var count = 0
        while !counts.stop.load(ordering: .relaxed), count < Self.maxOpens {
          let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
          guard fd >= 0 else { continue }
          count += 1
          if fcntl(fd, F_GETFD) == -1 || close(fd) == -1 { counts.losses.add(1, ordering: .relaxed) }
        }
        counts.opens.add(count, ordering: .relaxed)
      }
      counts.stop.store(false, ordering: .relaxed)
      churner.start()
      await client.shutdown()
      counts.stop.store(true, ordering: .relaxed)
      while !churner.isFinished { try await Task.sleep(for: .milliseconds(1)) }
    }
    #expect(counts.opens.load(ordering: .relaxed) > 0)
    #expect(counts.losses.load(ordering: .relaxed) == 0, "descriptors closed under another thread")
  }

  private final class Counts: Sendable {
    let stop = Atomic<Bool>(false)
    let losses = Atomic<Int>(0)
    let opens = Atomic<Int>(0)
  }

  /// Opens /dev/null until a descriptor comes out above every one in use: every hole below is
  /// then filled. The caller closes them.
  private static func fillHoles() -> [Int32] {
    let highest =
      (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?
      .compactMap { Int32($0) }.max() ?? 0
    var opened: [Int32] = []
    while opened.count < 4096 {
      let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else { break }
      opened.append(fd)
      if fd > highest { break }
    }
    return opened
  }
}
