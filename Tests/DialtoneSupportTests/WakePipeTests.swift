import DialtoneSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A woken pipe reads as ready until it is drained, however many wakes came, and a waker never
/// blocks even when nobody drains.
struct WakePipeTests {
  private func isReady(_ pipe: WakePipe) -> Bool {
    var fds = [pollfd(fd: pipe.descriptor, events: Int16(POLLIN), revents: 0)]
    return poll(&fds, 1, 0) == 1
  }

  @Test func readyAfterAWakeUntilDrained() throws {
    let pipe = try #require(WakePipe())
    defer { pipe.close() }
    #expect(!isReady(pipe))
    pipe.wake()
    pipe.wake()
    #expect(isReady(pipe))
    pipe.drain()
    #expect(!isReady(pipe))
  }

  @Test func aFullPipeDoesNotBlockAWaker() throws {
    let pipe = try #require(WakePipe())
    defer { pipe.close() }
    // More bytes than a pipe holds (64 KiB on Linux): each write past full returns at once.
    for _ in 0..<100_000 { pipe.wake() }
    #expect(isReady(pipe))
    pipe.drain()
    #expect(!isReady(pipe))
  }
}
