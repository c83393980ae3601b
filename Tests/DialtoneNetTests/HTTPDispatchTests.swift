import DialtoneNet
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// Each request reaches its handler once, and its answer goes to it, not to the next request on
/// the same connection.
@Suite(.serialized) struct HTTPDispatchTests {
  /// A POST with `Content-Length: 0` used to be handed to the router twice (at its head and again
  /// when lws reported its empty body complete); the second answer then went to the request that
  /// followed on the connection.
  @Test func anEmptyPostIsHandledOnceAndTheNextRequestGetsItsOwnAnswer() async throws {
    let calls = Locked(0)
    var router = Router()
    router.add(.POST, "/count") { _ in
      let n = calls.withLock {
        $0 += 1
        return $0
      }
      return .text("post \(n)", status: 201)
    }
    router.add(.GET, "/calls") { _ in .text("calls \(calls.withLock { $0 })") }
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0), router: router, webSocketHandler: EchoHandler())
    let port = server.port
    let responses = try await blockingIO {
      let connection = try RawHTTPConnection(port: port, receiveTimeout: 20)
      var responses: [RawHTTPResponse?] = []
      for _ in 0..<3 {
        connection.send("POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        responses.append(connection.readResponse())
        connection.send("GET /calls HTTP/1.1\r\nHost: x\r\n\r\n")
        responses.append(connection.readResponse())
      }
      return responses
    }
    await server.stop()
    #expect(responses.map { $0?.status } == [201, 200, 201, 200, 201, 200])
    #expect(responses.map { $0?.body } == ["post 1", "calls 1", "post 2", "calls 2", "post 3", "calls 3"])
    #expect(calls.withLock { $0 } == 3)
  }

  /// A pipelined request refused before its body (two Content-Lengths here) made lws spin on the
  /// network thread, and nobody else was answered again: that connection now just closes.
  @Test func aRefusedPipelinedRequestDoesNotStallTheServer() async throws {
    let server = try startServer(EchoHandler())
    let port = server.port
    let (first, afterwards) = try await blockingIO {
      let attacker = try RawHTTPConnection(port: port, receiveTimeout: 20)
      attacker.send(
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd"
      )
      let first = attacker.readResponse()?.status
      let other = try RawHTTPConnection(port: port, receiveTimeout: 20)
      other.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      return (first, other.readResponse()?.status)
    }
    await server.stop()
    #expect(first == 200)
    #expect(afterwards == 200)
  }
}
