import DialtoneNet
import DialtoneTestSupport
import Foundation
import Testing

/// The server's own HTTP/1.1 on a raw socket: limits answered instead of dropped, pipelined
/// requests answered in order, connections that end.
@Suite(.serialized) struct HTTPConnectionTests {
  private func withServer<T: Sendable>(_ body: @escaping @Sendable (Int) throws -> T) async throws -> T {
    let server = try startServer(EchoHandler())
    let port = server.port
    do {
      let result = try await blockingIO { try body(port) }
      await server.stop()
      return result
    } catch {
      await server.stop()
      throw error
    }
  }

  @Test func aHeadOverTheLimitIsAnswered431() async throws {
    let (response, closed) = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 20_000))\r\n\r\n")
      return (connection.readResponse(), connection.isClosedByServer())
    }
    #expect(response?.status == 431)
    #expect(response?.errorCode == "headers-too-large")
    #expect(closed)
  }

  /// obs-fold could hide a Content-Length from one parser and not another (RFC 9112 §5.2).
  @Test func anObsFoldIsRefused() async throws {
    let (response, closed) = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Content-Length: 5\r\n\r\nhello")
      return (connection.readResponse(), connection.isClosedByServer())
    }
    #expect(response?.status == 400)
    #expect(closed)
  }

  @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
    let responses = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      let body = #"{"name":"p","count":3}"#
      connection.send(
        "GET /items/1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
          + "GET /fail HTTP/1.1\r\nHost: x\r\n\r\nHEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      return (0..<4).map { _ in connection.readResponse() }
    }
    #expect(responses.map { $0?.status } == [200, 201, 409, 200])
    #expect(responses[1]?.body.contains(#""count":3"#) == true)
    // HEAD: the length GET would have, and no body (the connection ended right after the head).
    #expect(responses[3]?.headers["content-length"] == "15")  // {"status":"ok"}
    #expect(responses[3]?.body == "")
  }

  /// Refusing a request that follows another on its connection, with body bytes behind it, is
  /// now answered too (it once made lws spin; see HTTPDispatchTests), and the connection ends.
  @Test func aRefusedPipelinedRequestIsAnsweredAndEndsTheConnection() async throws {
    let (first, second, closed) = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      connection.send(
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd"
      )
      return (connection.readResponse(), connection.readResponse(), connection.isClosedByServer())
    }
    #expect(first?.status == 200)
    #expect(second?.status == 400)
    #expect(second?.headers["connection"] == "close")
    #expect(closed)
  }

  @Test func http10AndConnectionCloseEndAfterTheAnswer() async throws {
    let results = try await withServer { port in
      try ["GET /healthz HTTP/1.0\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"].map {
        let connection = try RawHTTPConnection(port: port)
        connection.send($0)
        return (connection.readResponse()?.status, connection.isClosedByServer())
      }
    }
    #expect(results.map(\.0) == [200, 200])
    #expect(results.map(\.1) == [true, true])
  }

  /// A refusal before the body is read, with the body still arriving: the answer is not lost
  /// to a reset (the server reads and discards what follows before it closes).
  @Test func aBodyRefusedUnreadDoesNotCostTheAnswer() async throws {
    let (response, closed) = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n")
      connection.send([UInt8](repeating: 0x20, count: 200_000))
      return (connection.readResponse(), connection.isClosedByServer())
    }
    #expect(response?.status == 413)
    #expect(closed)
  }

  /// A body bigger than what is buffered for pipelined requests is still read to its end.
  @Test func aLargeBodyIsReadWhole() async throws {
    let server = try WebServer(
      configuration: WebServerConfiguration(port: 0, maxBodyBytes: 1 << 20), router: makeRouter(),
      webSocketHandler: EchoHandler())
    let port = server.port
    let name = String(repeating: "n", count: 300_000)
    let response = try await blockingIO {
      let connection = try RawHTTPConnection(port: port)
      let body = #"{"name":"\#(name)","count":7}"#
      connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
      return connection.readResponse()
    }
    await server.stop()
    #expect(response?.status == 201)
    #expect(response?.body.count ?? 0 > 300_000)
  }

  @Test func expectContinueGetsA100BeforeTheBody() async throws {
    let (interim, final) = try await withServer { port in
      let connection = try RawHTTPConnection(port: port)
      let body = #"{"name":"c","count":1}"#
      connection.send(
        "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
      let interim = connection.readResponse()
      connection.send(body)
      return (interim?.status, connection.readResponse()?.status)
    }
    #expect(interim == 100)
    #expect(final == 201)
  }

  /// A head that never completes is not waited for for ever.
  @Test func aHeadThatNeverEndsIsClosed() async throws {
    let closed = try await withServer { port in
      let connection = try RawHTTPConnection(port: port, receiveTimeout: 30)
      connection.send("GET /healthz HTTP/1.1\r\nHost:")
      return connection.isClosedByServer()
    }
    #expect(closed)
  }
}
