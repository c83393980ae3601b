import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The server at its descriptor limit, in a child process (the limit is process-wide): it must
/// close what it cannot serve instead of leaving clients hanging, keep serving what it has, not
/// spin on the listening socket, and recover when descriptors are free again.
@Suite(.serialized) struct DescriptorExhaustionTests {
  private let healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

  @Test func atTheLimitNewConnectionsAreClosedExistingOnesServedAndTheListenerDoesNotSpin() throws {
    let server = try ServerProcess()
    defer { server.stop() }
    let keepAlive = try RawHTTPConnection(port: server.port)
    keepAlive.send(healthz)
    #expect(keepAlive.readResponse()?.status == 200)

    // The first `headroom` connections take the free descriptors; the rest find none.
    let headroom = 16
    try server.setDescriptorLimit(server.openDescriptors + headroom)
    var flood: [RawHTTPConnection] = []
    for _ in 0..<64 { flood.append(try RawHTTPConnection(port: server.port, receiveTimeout: 1)) }
    let closed = closedByServer(flood, expecting: flood.count - headroom)
    #expect(closed >= flood.count - headroom, "connections beyond the limit must be closed, not left hanging")

    // A connection accepted before the limit is still served.
    keepAlive.send(healthz)
    #expect(keepAlive.readResponse()?.status == 200)

    // Clients keep arriving while no descriptor is free: the listener must not busy-loop.
    let cpuBefore = server.cpuSeconds
    let start = Date()
    for _ in 0..<20 {
      flood.append(try RawHTTPConnection(port: server.port, receiveTimeout: 1))
      usleep(100_000)
    }
    let cpu = server.cpuSeconds - cpuBefore
    let wall = Date().timeIntervalSince(start)
    #expect(cpu < wall * 0.5, "server used \(cpu) s of CPU in \(wall) s while out of descriptors")

    flood.removeAll()
    var recovered = false
    for _ in 0..<100 where !recovered {
      let fresh = try RawHTTPConnection(port: server.port, receiveTimeout: 2)
      fresh.send(healthz)
      recovered = fresh.readResponse()?.status == 200
      if !recovered { usleep(100_000) }
    }
    #expect(recovered, "new connections must work again once descriptors are free")
    let log = server.log
    #expect(log.components(separatedBy: "out of file descriptors").count - 1 == 1, "one warning per episode: \(log)")
    #expect(log.contains("file descriptors available again"))
  }

  /// How many of `connections` the server closes (EOF or reset), polling until `expecting` have
  /// or a bounded number of rounds has passed.
  private func closedByServer(_ connections: [RawHTTPConnection], expecting: Int) -> Int {
    var closed = Set<Int32>()
    for _ in 0..<100 where closed.count < expecting {
      var fds = connections.filter { !closed.contains($0.fd) }.map {
        pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0)
      }
      guard poll(&fds, nfds_t(fds.count), 100) >= 0 else { break }
      for entry in fds where entry.revents != 0 {
        if let connection = connections.first(where: { $0.fd == entry.fd }), connection.isClosedByServer() {
          closed.insert(entry.fd)
        }
      }
    }
    return closed.count
  }
}
