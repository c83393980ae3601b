import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneNet

/// Requests whose body length two parsers could read differently (RFC 9112 §6) are answered
/// before their body is read, and their connection is closed: the bytes after the head must never
/// run as a second request. Exact bytes over a raw socket, since no client library sends these.
@Suite(.serialized) struct HTTPFramingTests {
  private let body = #"{"name":"a","count":1}"#

  /// Sends `request` on a fresh connection; the one response, and whether the server then closed.
  private func exchange(_ request: String, port: Int) async throws -> (RawHTTPResponse?, closed: Bool) {
    try await blockingIO {
      let connection = try RawHTTPConnection(port: port, receiveTimeout: 20)
      connection.send(request)
      let response = connection.readResponse()
      return (response, connection.isClosedByServer())
    }
  }

  private func expectRefused(
    _ request: String, status: Int, code: String, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let server = try startServer(EchoHandler())
    let (response, closed) = try await exchange(request, port: server.port)
    await server.stop()
    #expect(response?.status == status, sourceLocation: sourceLocation)
    #expect(response?.errorCode == code, sourceLocation: sourceLocation)
    #expect(closed, "the connection must close after the refusal", sourceLocation: sourceLocation)
  }

  @Test func twoContentLengthsAreRefused() async throws {
    let n = body.utf8.count
    try await expectRefused(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(n)\r\nContent-Length: \(n)\r\n\r\n\(body)",
      status: 400, code: "bad-request")
  }

  @Test func aContentLengthListIsRefused() async throws {
    let n = body.utf8.count
    try await expectRefused(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(n), \(n)\r\n\r\n\(body)", status: 400, code: "bad-request")
  }

  @Test func aNonNumericContentLengthIsRefused() async throws {
    try await expectRefused(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n\(body)", status: 400, code: "bad-request")
  }

  /// lws 4.1 decodes no transfer coding on requests (it would read a chunked body to the end of
  /// the connection), so every one is refused, `xchunked` included.
  @Test(arguments: ["chunked", "xchunked", "gzip, chunked"])
  func transferEncodingIsRefused(coding: String) async throws {
    try await expectRefused(
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: \(coding)\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      status: 501, code: "not-implemented")
  }

  @Test func contentLengthWithTransferEncodingIsRefused() async throws {
    try await expectRefused(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\nTransfer-Encoding: chunked\r\n\r\n\(body)",
      status: 400, code: "bad-request")
  }

  /// lws takes `Content-Length : 34` for an unknown header and runs the "body" as a second request;
  /// a proxy that reads it as Content-Length would not. Refused, and `/fail` (409) never runs.
  @Test(arguments: ["Content-Length : 34", "Content-Length\t: 34", "Transfer-Encoding : chunked"])
  func whitespaceBeforeTheColonOfAFramingHeaderIsRefused(field: String) async throws {
    let smuggled = "GET /fail HTTP/1.1\r\nHost: x\r\n\r\n"
    try await expectRefused(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\(field)\r\n\r\n\(smuggled)", status: 400, code: "bad-request")
  }

  /// lws reads a POST without Content-Length to the end of the connection; RFC 9112 gives it no
  /// body. The connection cannot carry another request both agree on, so it closes.
  @Test func aPostWithoutContentLengthClosesAfterItsResponse() async throws {
    try await expectRefused("POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", status: 400, code: "bad-request")
  }

  @Test func wellFramedRequestsStillShareAConnection() async throws {
    let server = try startServer(EchoHandler())
    let port = server.port
    let body = body
    let statuses = try await blockingIO {
      let connection = try RawHTTPConnection(port: port)
      connection.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:  \(body.utf8.count) \r\n\r\n\(body)")
      let posted = connection.readResponse()?.status
      connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
      return [posted, connection.readResponse()?.status]
    }
    await server.stop()
    #expect(statuses == [201, 200])
  }

  /// RFC 9110 §8.6: no Content-Length (nor type) on a 204, and the connection goes on.
  @Test func aNoContentAnswerCarriesNoLengthAndKeepsTheConnection() async throws {
    let server = try startServer(EchoHandler())
    let port = server.port
    let (deleted, next) = try await blockingIO {
      let connection = try RawHTTPConnection(port: port)
      connection.send("DELETE /items/a HTTP/1.1\r\nHost: x\r\n\r\n")
      let deleted = connection.readResponse()
      connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
      return (deleted, connection.readResponse())
    }
    await server.stop()
    #expect(deleted?.status == 204)
    #expect(deleted?.headers["content-length"] == nil, "\(deleted?.head ?? "")")
    #expect(deleted?.headers["content-type"] == nil, "\(deleted?.head ?? "")")
    #expect(next?.status == 200)
  }

  /// lws 4.1's default header table (4 KiB) dropped such a request without a response.
  @Test func aTenKilobyteHeaderFitsTheDefaultTable() async throws {
    let server = try startServer(EchoHandler())
    let token = String(repeating: "t", count: 10 * 1024)
    let (response, _) = try await exchange(
      "GET /items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n",
      port: server.port)
    await server.stop()
    #expect(response?.status == 200)
    #expect(response?.body.contains(token) == true)
  }

  @Test(
    arguments: [
      ("5", 5), (" 5\t", 5), ("0", 0), ("007", 7), ("+5", nil), ("-1", nil), ("5,5", nil), ("5 5", nil), ("", nil),
      ("0x5", nil), (String(repeating: "9", count: 19), nil),
    ] as [(String, Int?)])
  func contentLengthIsDecimalDigitsOnly(value: String, expected: Int?) {
    #expect(ServerRole.decimalLength(value) == expected)
  }
}
