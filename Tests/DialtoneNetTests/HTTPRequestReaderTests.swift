import Foundation
import Testing

@testable import DialtoneNet

/// The server's request reader on exact bytes, without sockets.
struct HTTPRequestReaderTests {
  private func heads(_ text: String, limit: Int = 16 * 1024) -> [HTTPRequestReader.Head] {
    var reader = HTTPRequestReader(maxHeadBytes: limit)
    reader.append(Array(text.utf8))
    var result: [HTTPRequestReader.Head] = []
    while true {
      let head = reader.nextHead()
      result.append(head)
      if case .head = head { continue }
      return result
    }
  }

  private func single(_ text: String) -> HTTPRequestHead? {
    if case .head(let head) = heads(text).first { return head }
    return nil
  }

  private func status(_ text: String, limit: Int = 16 * 1024) -> Int? {
    if case .failure(let error) = heads(text, limit: limit).first { return error.status }
    return nil
  }

  @Test func aRequestIsReadWithItsTargetDecoded() throws {
    let head = try #require(
      single("GET /items/a%20b/./c/../d//e?q=1+2&r=%26&empty&=x;s=3 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\n\r\n"))
    #expect(head.method == .GET)
    #expect(head.path == "/items/a b/d/e")
    #expect(head.query == ["q": "1 2", "r": "&", "empty": "", "s": "3"])
    #expect(head.field("x-a") == "1, 2")
    #expect(head.keepsAlive)
    #expect(single("GET /a/ HTTP/1.1\r\n\r\n")?.path == "/a/")
    #expect(single("GET http://example.com/v1/me?x=1 HTTP/1.1\r\n\r\n")?.path == "/v1/me")
    #expect(single("GET /x HTTP/1.0\r\n\r\n")?.keepsAlive == false)
    #expect(single("GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")?.keepsAlive == false)
    #expect(single("GET /x HTTP/1.1\nHost: bare-lf\n\n")?.field("host") == "bare-lf")
  }

  @Test func pipelinedRequestsComeOneAtATimeAndLeadingEmptyLinesAreSkipped() {
    let results = heads("\r\n\r\nGET /a HTTP/1.1\r\n\r\nDELETE /b HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n")
    let paths = results.compactMap { if case .head(let head) = $0 { return head.path } else { return nil } }
    #expect(paths == ["/a", "/b"])
    #expect(results.last == .needMore)
  }

  @Test func unknownMethodsParseWithoutAMethod() {
    #expect(single("BREW /pot HTTP/1.1\r\n\r\n")?.method == nil)
    #expect(single("BREW /pot HTTP/1.1\r\n\r\n")?.methodToken == "BREW")
  }

  @Test(
    arguments: [
      "GET /x HTTP/1.1\r\nContent-Length : 5\r\n\r\n",  // whitespace before the colon
      "GET /x HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n",  // obs-fold
      "GET /x HTTP/1.1\r\nX-A: 1\rX-B: 2\r\n\r\n",  // a bare CR
      "GET /x HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n",  // NUL in a value
      "GET /x HTTP/1.1\r\nno colon\r\n\r\n", "GET  /x HTTP/1.1\r\n\r\n", "GET /x HTTP/1.1 \r\n\r\n",
      "GET x HTTP/1.1\r\n\r\n", "GET /a%zz HTTP/1.1\r\n\r\n", "GET /a%00 HTTP/1.1\r\n\r\n", "GET /x HTTP/one\r\n\r\n",
      "G(T /x HTTP/1.1\r\n\r\n", "GET /x HTTP/1.1\r\nBad Name: 1\r\n\r\n",
    ])
  func malformedHeadsAre400(text: String) {
    #expect(status(text) == 400)
  }

  @Test func otherMajorVersionsAre505() {
    #expect(status("GET /x HTTP/2.0\r\n\r\n") == 505)
  }

  /// Over the limit is 431, whether or not the head has ended yet.
  @Test func aHeadOverTheLimitIs431() {
    let long = "GET /x HTTP/1.1\r\nX-Long: \(String(repeating: "a", count: 2000))\r\n"
    #expect(status(long + "\r\n", limit: 1024) == 431)
    #expect(status(long, limit: 1024) == 431)
    #expect(status(long + "\r\n", limit: 4096) == nil)
  }

  @Test func bodiesAreTakenByLength() throws {
    var reader = HTTPRequestReader(maxHeadBytes: 1024)
    reader.append(Array("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel".utf8))
    guard case .head(let head) = reader.nextHead() else {
      Issue.record("no head")
      return
    }
    #expect(try head.bodyLength().get() == 5)
    #expect(reader.takeBody(5) == nil)
    reader.append(Array("loGET".utf8))
    #expect(reader.takeBody(5) == Array("hello".utf8))
    #expect(reader.takeAll() == Array("GET".utf8))
    #expect(reader.isEmpty)
  }

  @Test(
    arguments: [
      ("Content-Length: 5\r\nContent-Length: 5", 400), ("Content-Length: 5, 5", 400), ("Content-Length: +5", 400),
      ("Transfer-Encoding: chunked", 501), ("Content-Length: 5\r\nTransfer-Encoding: chunked", 400),
    ] as [(String, Int)])
  func framingIsStrict(fields: String, status: Int) {
    let head = single("POST /x HTTP/1.1\r\n\(fields)\r\n\r\n")
    if case .failure(let error) = head?.bodyLength() {
      #expect(error.status == status)
    } else {
      Issue.record("\(fields) was accepted")
    }
  }
}

struct WebSocketHandshakeTests {
  private func head(_ fields: String) -> HTTPRequestHead? {
    var reader = HTTPRequestReader(maxHeadBytes: 4096)
    reader.append(Array("GET /v1/ws HTTP/1.1\r\nHost: x\r\n\(fields)\r\n".utf8))
    if case .head(let head) = reader.nextHead() { return head }
    return nil
  }

  private static let valid =
    "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    + "Sec-WebSocket-Version: 13\r\n"

  /// RFC 6455 §1.3's own example.
  @Test func theAcceptValueIsRFC6455s() {
    #expect(WebSocketHandshake.acceptValue(key: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
  }

  @Test func aValidUpgradeIsAccepted() throws {
    let request = try #require(head(Self.valid))
    #expect(WebSocketHandshake.isUpgrade(request))
    let response = String(decoding: try WebSocketHandshake.accept(request).get(), as: UTF8.self)
    #expect(response.hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
    #expect(response.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"))
    #expect(!response.contains("Sec-WebSocket-Protocol"))
    let withProtocol = try #require(head(Self.valid + "Sec-WebSocket-Protocol: chat, dialtone\r\n"))
    #expect(
      String(decoding: try WebSocketHandshake.accept(withProtocol).get(), as: UTF8.self).contains(
        "Sec-WebSocket-Protocol: dialtone\r\n"))
  }

  @Test func badUpgradesAreRefused() throws {
    let wrongVersion = try #require(head(Self.valid.replacingOccurrences(of: "13", with: "8")))
    #expect(throws: HTTPError.self) { try WebSocketHandshake.accept(wrongVersion).get() }
    let shortKey = try #require(head(Self.valid.replacingOccurrences(of: "dGhlIHNhbXBsZSBub25jZQ==", with: "c2hvcnQ=")))
    #expect(throws: HTTPError.self) { try WebSocketHandshake.accept(shortKey).get() }
    let noConnection = try #require(
      head(Self.valid.replacingOccurrences(of: "keep-alive, Upgrade", with: "keep-alive")))
    #expect(throws: HTTPError.self) { try WebSocketHandshake.accept(noConnection).get() }
    let otherProtocol = try #require(head(Self.valid + "Sec-WebSocket-Protocol: chat\r\n"))
    #expect(throws: HTTPError.self) { try WebSocketHandshake.accept(otherProtocol).get() }
  }
}

struct WebSocketClosingTests {
  @Test func thisSideClosesAfterTheQueueThenHalfClosesAndLingers() {
    var closing = WebSocketClosing()
    let first = closing.close(code: 4429, reason: Array("busy".utf8))
    let second = closing.close(code: 1000, reason: [])
    #expect(first && !second)
    #expect(closing.step(queueEmpty: false, flushed: true) == .nothing)
    #expect(closing.step(queueEmpty: true, flushed: false) == .nothing)
    #expect(closing.step(queueEmpty: true, flushed: true) == .writeClose(code: 4429, reason: Array("busy".utf8)))
    #expect(closing.step(queueEmpty: true, flushed: false) == .nothing)
    #expect(closing.step(queueEmpty: true, flushed: true) == .halfClose)
    #expect(closing.isLingering)
    let drop = closing.peerClosed(code: 4429)
    #expect(!drop)
    #expect(closing.step(queueEmpty: true, flushed: true) == .closeNow)
  }

  @Test func thePeerClosingFirstIsAnsweredWithItsCode() {
    var closing = WebSocketClosing()
    let dropped = closing.peerClosed(code: 1001)
    #expect(dropped)
    #expect(closing.step(queueEmpty: false, flushed: false) == .nothing)
    #expect(closing.step(queueEmpty: false, flushed: true) == .writeClose(code: 1001, reason: []))
    #expect(closing.step(queueEmpty: true, flushed: true) == .closeNow)
    var empty = WebSocketClosing()
    let emptyDropped = empty.peerClosed(code: nil)
    #expect(emptyDropped)
    #expect(empty.step(queueEmpty: true, flushed: true) == .writeClose(code: nil, reason: []))
  }

  /// Both close at once: our frame, not yet written, answers theirs and TCP closes after it.
  @Test func crossingClosesEndAfterOurFrame() {
    var closing = WebSocketClosing()
    _ = closing.close(code: 1001, reason: [])
    let dropped = closing.peerClosed(code: 1000)
    #expect(dropped)
    #expect(closing.step(queueEmpty: true, flushed: true) == .writeClose(code: 1001, reason: []))
    #expect(closing.step(queueEmpty: true, flushed: true) == .closeNow)
  }
}
