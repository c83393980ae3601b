import CLibWebSockets

/// HTTP/1.1 on the server's raw sockets: requests read by `HTTPRequestReader`, answered through
/// the `Router` one at a time and in order, and WebSocket upgrades on `webSocketPath`.
///
/// Whatever two parsers could frame differently (a proxy in front and this server) is refused
/// before a body is read, and the connection closes after the refusal (RFC 9112 §6, §9.6):
/// the bytes one of them calls a body must never run as a second request.
extension ServerRole {
  /// Bytes arrived on an HTTP connection; false when it must close now.
  func httpReceived(_ connection: HTTPConnection, _ input: UnsafeRawBufferPointer, on loop: ServiceLoop) -> Bool {
    if connection.ending { return true }  // discarded: the connection is ending
    connection.reader.append(input)
    serveRequests(connection, on: loop)
    return true
  }

  /// Reads requests off the connection while none is being answered.
  func serveRequests(_ connection: HTTPConnection, on loop: ServiceLoop) {
    while connection.exchange == nil, !connection.ending, httpConnections[connection.id] === connection {
      switch connection.reader.nextHead() {
      case .needMore:
        connection.wait(for: connection.reader.isEmpty && connection.answered > 0 ? .idle : .head)
        return
      case .failure(let error):
        refuse(connection, HTTPRequest(method: .GET, path: "/"), error, on: loop)
      case .head(let head):
        connection.disarm()
        start(head, on: connection, loop: loop)
      }
    }
    if let exchange = connection.exchange, let length = exchange.awaitingBody {
      readBody(exchange, length, on: connection, loop: loop)
    }
    // Pipelined requests wait for the one being answered; past a bound, so does the socket (a
    // body still arriving is read whole: it is bounded by maxBodyBytes).
    if let exchange = connection.exchange, exchange.awaitingBody == nil,
      connection.reader.buffered.count > HTTPConnection.pipelineLimit
    {
      connection.pauseReading()
    }
  }

  private func start(_ head: HTTPRequestHead, on connection: HTTPConnection, loop: ServiceLoop) {
    let request = HTTPRequest(
      method: head.method ?? .GET, path: head.path, query: head.query, headers: head.forwardedHeaders,
      remoteAddress: loop.peerAddress(connection.wsi))
    if loop.draining {
      return refuse(
        connection, request, HTTPError(status: 503, code: "unavailable", message: "server is shutting down"),
        on: loop)
    }
    guard head.method != nil else {
      return refuse(
        connection, request, HTTPError(status: 405, code: "method-not-allowed", message: "unsupported method"),
        on: loop)
    }
    let declared: Int?
    switch head.bodyLength() {
    case .success(let length): declared = length
    case .failure(let error): return refuse(connection, request, error, on: loop)
    }
    if WebSocketHandshake.isUpgrade(head), head.path == configuration.webSocketPath {
      guard (declared ?? 0) == 0 else {
        return refuse(connection, request, .badRequest("a WebSocket upgrade has no body"), on: loop)
      }
      switch WebSocketHandshake.accept(head) {
      case .success(let response): return upgrade(connection, head, response, on: loop)
      case .failure(let error): return refuse(connection, request, error, on: loop)
      }
    }
    if let declared, declared > configuration.maxBodyBytes {
      return refuse(
        connection, request,
        HTTPError(status: 413, code: "too-large", message: "body exceeds \(configuration.maxBodyBytes) bytes"),
        on: loop)
    }
    let exchange = HTTPExchange(id: connection.id, request: request)
    // RFC 9112 gives a POST, PUT or PATCH without Content-Length no body, but a client that
    // meant to send one would have its bytes read as a next request: the connection ends.
    exchange.closeAfterResponse =
      !head.keepsAlive || (declared == nil && [.POST, .PUT, .PATCH].contains(request.method))
    connection.exchange = exchange
    guard let declared, declared > 0 else { return dispatch(exchange, on: loop) }
    exchange.awaitingBody = declared
    if head.minorVersion >= 1, head.field("expect")?.lowercased() == "100-continue",
      connection.reader.buffered.count < declared
    {
      _ = HTTPResponseHead.continueBytes.withUnsafeBytes { loop.writeRaw(connection.wsi, $0) }
    }
  }

  private func readBody(_ exchange: HTTPExchange, _ length: Int, on connection: HTTPConnection, loop: ServiceLoop) {
    guard let body = connection.reader.takeBody(length) else {
      connection.wait(for: .body)
      return
    }
    exchange.awaitingBody = nil
    exchange.request.body = body
    dispatch(exchange, on: loop)
  }

  /// Answers `error` without reading further (what follows is not trusted to be a request), and
  /// ends the connection after the answer.
  private func refuse(_ connection: HTTPConnection, _ request: HTTPRequest, _ error: HTTPError, on loop: ServiceLoop) {
    let exchange = HTTPExchange(id: connection.id, request: request)
    exchange.closeAfterResponse = true
    connection.exchange = exchange
    exchange.setResponse(.error(error), draining: loop.draining)
    writeResponse(connection, on: loop)
  }

  private func dispatch(_ exchange: HTTPExchange, on loop: ServiceLoop) {
    exchange.dispatched = true
    httpConnections[exchange.id]?.disarm()
    let request = exchange.request
    let id = exchange.id
    let router = router
    Task {
      let response = await router.respond(to: request)
      loop.post(.respond(id, response))
    }
  }

  /// The router answered request `id`.
  func respond(_ id: UInt64, _ response: HTTPResponse, on loop: ServiceLoop) {
    guard let connection = httpConnections[id], let exchange = connection.exchange, exchange.dispatched else { return }
    exchange.setResponse(response, draining: loop.draining)
    writeResponse(connection, on: loop)
  }

  /// Writes what the socket takes of the current response; once all of it is handed over, the
  /// connection ends or goes on with the next request.
  func writeResponse(_ connection: HTTPConnection, on loop: ServiceLoop) {
    guard let exchange = connection.exchange, exchange.hasResponse else { return }
    switch exchange.write(to: connection.wsi, on: loop, flushed: { connection.flushed }) {
    case .failed:
      lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    case .more:
      connection.pauseReading()
      lws_callback_on_writable(connection.wsi)
    case .done:
      connection.answeredOne()
      if exchange.closeAfterResponse || loop.draining {
        connection.end()
        connection.finishIfFlushed()
        if !connection.flushed { lws_callback_on_writable(connection.wsi) }
      } else {
        if connection.flushed {
          connection.resumeReading()
        } else {
          connection.pauseReading()
          lws_callback_on_writable(connection.wsi)
        }
        serveRequests(connection, on: loop)
      }
    }
  }

  /// The writable callback of an HTTP connection.
  func httpWritable(_ connection: HTTPConnection, on loop: ServiceLoop) -> Int32 {
    guard connection.flushed else {
      lws_callback_on_writable(connection.wsi)
      return 0
    }
    if connection.ending {
      connection.finishIfFlushed()
      return 0
    }
    if connection.exchange?.hasResponse == true {
      writeResponse(connection, on: loop)
    } else if connection.reader.buffered.count <= HTTPConnection.pipelineLimit {
      connection.resumeReading()
    }
    return 0
  }
}

extension ServerRole {
  /// `Content-Length`'s grammar (see `HTTPRequestHead.decimalLength`).
  static func decimalLength(_ value: String) -> Int? { HTTPRequestHead.decimalLength(value) }
}
