import DialtoneTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The server at its descriptor limit, in a child process (the limit is process-wide): it must
/// close what it cannot serve instead of leaving clients hanging, keep serving what it has, not
/// spin on the listening socket, and recover when descriptors are free again.
@Suite(.serialized) struct DescriptorExhaustionTests {
  private static let healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
  /// Free descriptors left to the server: the first this many flood connections take them.
  private static let headroom = 16
  private static let floodCount = 64

  private struct Observations: Sendable {
    var servedBefore = false
    var closedBeyondLimit = 0
    var servedDuring = false
    var cpuSeconds = 0.0
    var wallSeconds = 0.0
    var servedAfter = false
    var log = ""
  }

  @Test func atTheLimitNewConnectionsAreClosedExistingOnesServedAndTheListenerDoesNotSpin() async throws {
    let seen = try await blockingIO { try Self.floodAtTheLimit() }
    #expect(seen.servedBefore)
    // A descriptor or two the server holds only briefly (at the count) may go to the flood.
    #expect(
      seen.closedBeyondLimit >= Self.floodCount - Self.headroom - 2,
      "connections beyond the limit must be closed, not left hanging")
    #expect(seen.servedDuring, "a connection accepted before the limit must still be served")
    #expect(
      seen.cpuSeconds < seen.wallSeconds * 0.5,
      "server used \(seen.cpuSeconds) s of CPU in \(seen.wallSeconds) s while out of descriptors")
    #expect(seen.servedAfter, "new connections must work again once descriptors are free")
    #expect(seen.log.components(separatedBy: "out of file descriptors").count - 1 == 1, "one warning: \(seen.log)")
    #expect(seen.log.contains("file descriptors available again"))
  }

  /// Blocking socket work; lws closes an idle keep-alive connection after 5 s, so the steps up to
  /// the second /healthz stay well inside that.
  private static func floodAtTheLimit() throws -> Observations {
    var seen = Observations()
    let server = try ServerProcess()
    defer { server.stop() }
    let keepAlive = try RawHTTPConnection(port: server.port)
    keepAlive.send(healthz)
    seen.servedBefore = keepAlive.readResponse()?.status == 200

    try server.setDescriptorLimit(server.openDescriptors + headroom)
    var flood: [RawHTTPConnection] = []
    for _ in 0..<floodCount { flood.append(try RawHTTPConnection(port: server.port, receiveTimeout: 1)) }
    seen.closedBeyondLimit = closedByServer(flood, expecting: floodCount - headroom - 2)

    keepAlive.send(healthz)
    seen.servedDuring = keepAlive.readResponse()?.status == 200

    // Clients keep arriving while no descriptor is free: the listener must not busy-loop.
    let cpuBefore = server.cpuSeconds
    let start = Date()
    for _ in 0..<20 {
      flood.append(try RawHTTPConnection(port: server.port, receiveTimeout: 1))
      usleep(100_000)
    }
    seen.cpuSeconds = server.cpuSeconds - cpuBefore
    seen.wallSeconds = Date().timeIntervalSince(start)

    flood.removeAll()
    // The server frees the flood's descriptors as it reads their closes, so the first fresh
    // connection may still find it at the limit: the episode ends (and is logged as over) with
    // the first accept that does not reach it again.
    for _ in 0..<100 where !(seen.servedAfter && server.log.contains("file descriptors available again")) {
      let fresh = try RawHTTPConnection(port: server.port, receiveTimeout: 2)
      fresh.send(healthz)
      seen.servedAfter = fresh.readResponse()?.status == 200
      usleep(100_000)
    }
    seen.log = server.log
    return seen
  }

  /// How many of `connections` the server closes (EOF or reset), polling until `expecting` have
  /// or 20 s have passed: the server child shares two cores with the other test processes.
  /// Bounded by passes (30) instead, the wait once ended with 34 counted, in under a second.
  private static func closedByServer(_ connections: [RawHTTPConnection], expecting: Int) -> Int {
    var closed = Set<Int32>()
    let deadline = Date().addingTimeInterval(20)
    while closed.count < expecting && Date() < deadline {
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
