@testable import DialtoneNet
import Foundation
import Testing
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

    let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #expect(client >= 0)
    defer { close(client) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(listener.port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    #expect(connected == 0)

    var iterator = stream.makeAsyncIterator()
    let accepted = try #require(await iterator.next()?.first)
    defer { close(accepted) }
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    #expect(getsockopt(accepted, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0)
    #expect(value == 1)
  }
}
