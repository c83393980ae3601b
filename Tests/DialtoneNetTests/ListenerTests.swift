import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneNet

#if canImport(Glibc)
  import Glibc
#endif

@Suite struct ListenerTests {
  /// Accepted sockets must not wait for Nagle: a relayed message written right after the ack
  /// of a request would otherwise sit until the client acks the first write (~20 ms).
  @Test func acceptedSocketsHaveNagleOff() async throws {
    let (stream, sink) = AsyncStream<[Int32]>.makeStream()
    let listener = try Listener(host: "127.0.0.1", port: 0) { sink.yield($0) }
    defer { listener.stop() }

    let client = try #require(connectLoopback(port: listener.port))
    defer { close(client) }

    var iterator = stream.makeAsyncIterator()
    let accepted = try #require(await iterator.next()?.first)
    defer { close(accepted) }
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    #expect(getsockopt(accepted, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0)
    #expect(value == 1)
  }
}
