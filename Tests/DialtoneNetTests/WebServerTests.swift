import DialtoneJSON
import DialtoneNet
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

/// Echoes every message and records lifecycle events; `broadcast` sends from a foreign thread.
final class EchoHandler: WebSocketHandler, Sendable {
  private struct Sockets: Sendable {
    var opened: [WebSocketConnection] = []
    var closedCodes: [UInt16?] = []
    var upgrades: [UpgradeRequest] = []
  }
  private let sockets = Locked(Sockets())

  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {
    sockets.withLock {
      $0.opened.append(connection)
      $0.upgrades.append(request)
    }
  }
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    if message == Array("close-me".utf8) {
      connection.close(code: 4409, reason: "replaced")
      return
    }
    connection.send(text: message)
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {
    sockets.withLock { sockets in
      sockets.closedCodes.append(code)
      sockets.opened.removeAll { $0 === connection }
    }
  }
  var openCount: Int { sockets.withLock { $0.opened.count } }
  var totalOpened: Int { sockets.withLock { $0.upgrades.count } }
  var lastUpgrade: UpgradeRequest? { sockets.withLock { $0.upgrades.last } }
  var closedCount: Int { sockets.withLock { $0.closedCodes.count } }
  func broadcastFromAnotherThread(_ text: String) {
    let targets = sockets.withLock { $0.opened }
    DispatchQueue.global().async { for c in targets { c.send(text: text) } }
  }
}

/// A JSON response, as the server's routes write one (through the typed codec there).
func jsonResponse(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
  HTTPResponse(status: status, body: value.serialized)
}

/// `{name, count}` from a request body, every fault a 400 the client can act on.
func echoBody(_ request: HTTPRequest) throws(HTTPError) -> JSONValue {
  guard let body = JSONValue(parsing: request.body), case .object(let fields) = body else {
    throw HTTPError(status: 400, code: "bad-request", message: "body is not valid JSON")
  }
  guard let name = fields["name"]?.stringValue else {
    throw HTTPError(status: 400, code: "bad-request", message: "wrong type for \"name\"")
  }
  guard let count = fields["count"]?.integerValue else {
    throw HTTPError(status: 400, code: "bad-request", message: "wrong type for \"count\"")
  }
  return ["name": .string(name), "count": .int(count)]
}

func makeRouter() -> Router {
  var router = Router()
  router.add(.GET, "/healthz") { _ in jsonResponse(["status": "ok"]) }
  router.add(.GET, "/items/{itemID}") { request in
    jsonResponse([
      "item": .string(request.pathParameters["itemID"] ?? ""), "q": .string(request.query["q"] ?? ""),
      "auth": .string(request.bearerToken ?? ""),
    ])
  }
  router.add(.POST, "/echo") { request in jsonResponse(try echoBody(request), status: 201) }
  router.add(.DELETE, "/items/{itemID}") { _ in HTTPResponse(status: 204) }
  router.add(.GET, "/big") { _ in .text(String(repeating: "x", count: 200_000)) }
  router.add(.GET, "/fail") { _ in throw HTTPError(status: 409, code: "conflict", message: "already there") }
  return router
}

func startServer(_ handler: EchoHandler, maxMessage: Int = 64 * 1024, drain: Double = 3) throws -> WebServer {
  try WebServer(
    configuration: WebServerConfiguration(
      port: 0, maxMessageBytes: maxMessage, maxBodyBytes: 4096, drainSeconds: drain),
    router: makeRouter(), webSocketHandler: handler)
}

@Suite(.serialized) struct WebServerTests {
  @Test func httpRoutesParametersQueryAndErrors() async throws {
    let server = try startServer(EchoHandler())
    let base = "http://127.0.0.1:\(server.port)"

    let health = try await http("GET", "\(base)/healthz")
    #expect(health.status == 200)
    #expect(health.json?["status"] as? String == "ok")

    let item = try await http("GET", "\(base)/items/a%20b?q=hello", headers: ["Authorization": "Bearer tok123"])
    #expect(item.status == 200)
    #expect(item.json?["item"] as? String == "a b")
    #expect(item.json?["q"] as? String == "hello")
    #expect(item.json?["auth"] as? String == "tok123")

    let missing = try await http("GET", "\(base)/nope")
    #expect(missing.status == 404)
    #expect(missing.errorCode == "not-found")

    let wrongMethod = try await http("POST", "\(base)/healthz", body: Array("{}".utf8))
    #expect(wrongMethod.status == 405)
    let port = server.port
    let (allow, once) = try await blockingIO {
      let connection = try RawHTTPConnection(port: port)
      connection.send("PUT /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
      let allow = connection.readResponse()?.headers["allow"]
      // `%2541` is `%41` once decoded, never `A`.
      connection.send("GET /items/a%2541 HTTP/1.1\r\nHost: x\r\n\r\n")
      return (allow, connection.readResponse()?.body)
    }
    #expect(allow == "GET, HEAD")
    #expect(once?.contains(#""item":"a%41""#) == true)

    let thrown = try await http("GET", "\(base)/fail")
    #expect(thrown.status == 409)
    #expect(thrown.errorCode == "conflict")

    let deleted = try await http("DELETE", "\(base)/items/7")
    #expect(deleted.status == 204)

    let big = try await http("GET", "\(base)/big")
    #expect(big.status == 200)
    #expect(big.body.count == 200_000)

    await server.stop()
  }

  @Test func jsonBodiesAndTheirErrors() async throws {
    let server = try startServer(EchoHandler())
    let base = "http://127.0.0.1:\(server.port)"
    let created = try await http(
      "POST", "\(base)/echo", body: Array(#"{"name":"a","count":2}"#.utf8),
      headers: ["Content-Type": "application/json"])
    #expect(created.status == 201)
    #expect(created.json?["count"] as? Int == 2)

    let malformed = try await http("POST", "\(base)/echo", body: Array("{nope".utf8))
    #expect(malformed.status == 400)
    #expect(malformed.errorCode == "bad-request")

    let wrongType = try await http("POST", "\(base)/echo", body: Array(#"{"name":"a","count":"two"}"#.utf8))
    #expect(wrongType.status == 400)
    #expect((wrongType.json?["error"] as? [String: Any])?["message"] as? String == "wrong type for \"count\"")

    let tooBig = try await http("POST", "\(base)/echo", body: [UInt8](repeating: 0x20, count: 10_000))
    #expect(tooBig.status == 413)
    #expect(tooBig.errorCode == "too-large")

    // The server keeps serving after rejecting a body.
    #expect(try await http("GET", "\(base)/healthz").status == 200)
    await server.stop()
  }

  @Test func webSocketEchoHeadersAndSendsFromAnyThread() async throws {
    let handler = EchoHandler()
    let server = try startServer(handler)
    let client = try WebSocketClient()
    let probe = try ClientProbe(
      client: client, url: "ws://127.0.0.1:\(server.port)/v1/ws?v=1",
      headers: [HTTPHeaderField("Authorization", "Bearer abc")])
    #expect(try await probe.next("open") == .opened)
    // The client may see the handshake complete before the server's handler has run.
    #expect(await eventually { handler.lastUpgrade != nil })
    #expect(handler.lastUpgrade?.bearerToken == "abc")
    #expect(handler.lastUpgrade?.query["v"] == "1")

    probe.connection.send(text: "hello")
    #expect(try await probe.nextText() == "hello")

    // Fragment-free large message just under the limit survives intact.
    let large = String(repeating: "y", count: 60_000)
    probe.connection.send(text: large)
    #expect(try await probe.nextText() == large)

    handler.broadcastFromAnotherThread("from-worker")
    #expect(try await probe.nextText() == "from-worker")

    // Ordering holds for a burst.
    for i in 0..<200 { probe.connection.send(text: "m\(i)") }
    for i in 0..<200 { #expect(try await probe.nextText() == "m\(i)") }

    probe.connection.send(text: "close-me")
    let closeEvent = try await probe.next("close")
    #expect(closeEvent == .closed(code: 4409), "got \(closeEvent)")
    await client.shutdown()
    await server.stop()
  }

  @Test func oversizeMessageClosesWith1009AndOthersKeepWorking() async throws {
    let handler = EchoHandler()
    let server = try startServer(handler, maxMessage: 1024)
    let client = try WebSocketClient()
    let url = "ws://127.0.0.1:\(server.port)/v1/ws"
    let victim = try ClientProbe(client: client, url: url)
    let bystander = try ClientProbe(client: client, url: url)
    #expect(try await victim.next() == .opened)
    #expect(try await bystander.next() == .opened)

    victim.connection.send(text: String(repeating: "z", count: 2048))
    #expect(try await victim.next("1009 close") == .closed(code: 1009))

    bystander.connection.send(text: "still here")
    #expect(try await bystander.nextText() == "still here")
    await client.shutdown()
    await server.stop()
  }

  @Test func upgradeOnAnotherPathIsRefused() async throws {
    let server = try startServer(EchoHandler())
    let client = try WebSocketClient()
    let probe = try ClientProbe(client: client, url: "ws://127.0.0.1:\(server.port)/elsewhere")
    if case .failed = try await probe.next("refusal") {} else { Issue.record("upgrade on a wrong path was accepted") }
    await client.shutdown()
    await server.stop()
  }

  @Test func connectFailureIsReported() async throws {
    let client = try WebSocketClient()
    // Port 1 on loopback: nothing listens there.
    let probe = try ClientProbe(client: client, url: "ws://127.0.0.1:1/v1/ws")
    if case .failed = try await probe.next("failure") {} else { Issue.record("connect to a closed port did not fail") }
    #expect(throws: NetError.self) { try client.connect(to: "http://nope", onEvent: { _ in }) }
    await client.shutdown()
  }

  @Test func shutdownClosesSocketsWith1001AndStops() async throws {
    let handler = EchoHandler()
    let server = try startServer(handler)
    let client = try WebSocketClient()
    let url = "ws://127.0.0.1:\(server.port)/v1/ws"
    let probes = try (0..<5).map { _ in try ClientProbe(client: client, url: url) }
    for probe in probes { #expect(try await probe.next() == .opened) }

    try await withDeadline(10, "server stop") { await server.stop() }
    for probe in probes { #expect(try await probe.next("1001") == .closed(code: 1001)) }
    #expect(handler.closedCount == 5)

    // Nothing listens any more.
    let late = try ClientProbe(client: client, url: url)
    if case .failed = try await late.next("refused") {} else { Issue.record("server still accepting after shutdown") }
    await client.shutdown()
  }

  @Test func listenFailureIsAnError() throws {
    let first = try startServer(EchoHandler())
    #expect(throws: NetError.self) {
      _ = try WebServer(
        configuration: WebServerConfiguration(port: first.port), router: Router(), webSocketHandler: EchoHandler())
    }
  }

  @Test func routerMatchesWithoutNetwork() async {
    let router = makeRouter()
    let response = await router.respond(to: HTTPRequest(method: .GET, path: "/items/42"))
    #expect(response.status == 200)
    let head = await router.respond(to: HTTPRequest(method: .HEAD, path: "/healthz"))
    #expect(head.status == 200)
  }
}

extension WebServerTests {
  @Test func messagesSentBeforeTheHandshakeAreQueued() async throws {
    let server = try startServer(EchoHandler())
    let client = try WebSocketClient()
    let probe = try ClientProbe(client: client, url: "ws://127.0.0.1:\(server.port)/v1/ws")
    probe.connection.send(text: "early")  // before .opened
    #expect(try await probe.nextText() == "early")
    await client.shutdown()
    await server.stop()
  }
}

extension WebServerTests {
  /// A server that pings after 1 s of silence and drops a socket silent for 2 s, sweeping every
  /// 0.1 s; and a client that never pings by itself and answers pings automatically.
  private func keepaliveRig() throws -> (EchoHandler, WebServer, WebSocketClient) {
    let handler = EchoHandler()
    var configuration = WebServerConfiguration(port: 0, pingIntervalSeconds: 1, idleTimeoutSeconds: 2)
    configuration.keepaliveSweepSeconds = 0.1
    let server = try WebServer(configuration: configuration, router: makeRouter(), webSocketHandler: handler)
    return (handler, server, try WebSocketClient(pingIntervalSeconds: 3600, idleTimeoutSeconds: 7200))
  }

  /// The server pings a quiet socket; the peer's pongs keep it open. A peer that stops answering
  /// (here: a raw TCP socket that never speaks WebSocket after the handshake) is dropped.
  @Test func keepalivePingsQuietPeersAndDropsDeadOnes() async throws {
    let (handler, server, client) = try keepaliveRig()
    let quiet = try ClientProbe(client: client, url: "ws://127.0.0.1:\(server.port)/v1/ws")
    #expect(try await quiet.next() == .opened)

    let dead = try RawWebSocket.handshake(port: server.port)
    try await eventually("both sockets open") { handler.totalOpened >= 2 }
    try await eventually("the silent socket dropped") { handler.closedCount >= 1 }
    // Well past the idle timeout the quiet (but answering) socket is still alive.
    try await Task.sleep(for: .seconds(3))
    #expect(handler.closedCount == 1)
    quiet.connection.send(text: "still here")
    #expect(try await quiet.nextText() == "still here")
    dead.close()
    await client.shutdown()
    await server.stop()
  }

  /// Sockets that connect together come due together: their pings are spread over sweeps and
  /// loop passes (`KeepaliveBacklog`), and every one of them still goes out. Were one lost, its
  /// socket would be dropped at the idle timeout.
  @Test func keepaliveReachesEverySocketOfABigSweep() async throws {
    let (handler, server, client) = try keepaliveRig()
    var probes: [ClientProbe] = []
    for _ in 0..<300 {  // more than two slices
      probes.append(try ClientProbe(client: client, url: "ws://127.0.0.1:\(server.port)/v1/ws"))
    }
    try await eventually("all open") { handler.totalOpened >= 300 }
    try await Task.sleep(for: .seconds(4))  // two idle timeouts
    #expect(handler.closedCount == 0)
    probes[299].connection.send(text: "still here")
    #expect(try await probes[299].nextText() == "still here")
    await client.shutdown()
    await server.stop()
  }
}

extension WebServerTests {
  /// With the heartbeat at 25 s and a sweep every 5 s: pinged past 35 s of silence (30 s, the
  /// sweep being up to one late), dropped past 60 s; and a short heartbeat still pings well
  /// before the drop.
  @Test func keepaliveForAHeartbeatPingsOnlyPastItAndTwoSweeps() {
    var configuration = WebServerConfiguration()
    configuration.keepAlive(heartbeatSeconds: 25)
    #expect(configuration.pingIntervalSeconds == 35 && configuration.idleTimeoutSeconds == 60)
    configuration.keepAlive(heartbeatSeconds: 1)
    #expect(configuration.pingIntervalSeconds == 2 && configuration.idleTimeoutSeconds == 12)
    configuration.keepAlive(heartbeatSeconds: 1, sweepSeconds: 0.1)
    #expect(configuration.pingIntervalSeconds == 2 && configuration.idleTimeoutSeconds == 12)
  }

  /// A client that keeps its heartbeat (a message each heartbeat, as the protocol asks) gets no
  /// ping from the server; one that is silent gets one, long before it would be dropped.
  @Test func aClientKeepingItsHeartbeatIsNeverPingedAndASilentOneIs() async throws {
    var configuration = WebServerConfiguration(port: 0)
    configuration.keepAlive(heartbeatSeconds: 1, sweepSeconds: 0.1)
    let server = try WebServer(configuration: configuration, router: makeRouter(), webSocketHandler: EchoHandler())
    let (talking, silent) = (
      try RawWebSocket.handshake(port: server.port), try RawWebSocket.handshake(port: server.port)
    )
    for n in 0..<6 {
      talking.write(RawWebSocket.frame(opcode: 0x1, payload: Array("beat \(n)".utf8)))
      try await Task.sleep(for: .seconds(1))
    }
    // The echoes, and any ping the server sent meanwhile, wait in the socket.
    let frames = talking.readFrames(seconds: 1, limit: 16)
    #expect(frames.count == 6 && frames.allSatisfy { $0.opcode == 0x1 }, "\(frames.map(\.opcode))")
    let silentFrames = silent.readFrames(seconds: 10, limit: 1)
    #expect(silentFrames.first?.opcode == 0x9)
    talking.close()
    silent.close()
    await server.stop()
  }
}
