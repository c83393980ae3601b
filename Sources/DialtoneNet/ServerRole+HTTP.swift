import CLibWebSockets

extension ServerRole {
  func handleHTTP(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons,
    _ input: UnsafeMutableRawPointer?, _ length: Int, on loop: ServiceLoop
  ) -> Int32 {
    switch reason {
    case LWS_CALLBACK_HTTP:
      var id = dt_lws_get_id(wsi)
      if id == 0 { id = loop.allocateID(for: wsi) }
      // An earlier request on this connection was answered: this one came after it (kept alive
      // or pipelined). The wsi's id alone cannot say so: lws may hand a reused wsi its old id.
      let pipelined = answeredConnections.contains(id)
      let target = requestTarget(wsi)
      let headers = readHeaders(wsi)
      guard let method = requestMethod(wsi) else {
        return startExchange(
          id, wsi, HTTPRequest(method: .GET, path: target.path),
          early: HTTPError(status: 405, code: "method-not-allowed", message: "unsupported method"), pipelined: pipelined
        )
      }
      let request = HTTPRequest(
        method: method, path: target.path, query: target.query, headers: headers,
        remoteAddress: loop.peerAddress(wsi))
      if loop.draining {
        return startExchange(
          id, wsi, request, early: HTTPError(status: 503, code: "unavailable", message: "server is shutting down"),
          pipelined: pipelined)
      }
      let declared: Int?
      switch requestBodyLength(wsi) {
      case .success(let length): declared = length
      case .failure(let error): return startExchange(id, wsi, request, early: error, pipelined: pipelined)
      }
      if let declared, declared > configuration.maxBodyBytes {
        return startExchange(
          id, wsi, request,
          early: HTTPError(
            status: 413, code: "too-large", message: "body exceeds \(configuration.maxBodyBytes) bytes"),
          pipelined: pipelined)
      }
      let exchange = HTTPExchange(id: id, wsi: wsi, request: request)
      exchange.expectedLength = declared
      // lws reads a POST, PUT or PATCH without Content-Length to the end of the connection (RFC
      // 9112 says it has no body): whatever follows is not a next request to lws, so end here.
      if declared == nil, [.POST, .PUT, .PATCH].contains(method) { exchange.closeAfterResponse = true }
      exchanges[id] = exchange
      if (declared ?? 0) == 0 { dispatch(exchange, on: loop) }
      return 0

    case LWS_CALLBACK_HTTP_BODY:
      guard let exchange = exchanges[dt_lws_get_id(wsi)] else { return -1 }
      // Without Content-Length a request has no body (RFC 9112 6.3); lws 4.1.6 still hands over
      // what follows, and for a pipelined request it hands a buffer it has already freed (found
      // by FuzzHTTPRequest under AddressSanitizer). Such bytes are never read.
      guard exchange.expectedLength != nil else { return 0 }
      if exchange.bodyTooLarge { return 0 }
      if exchange.request.body.count + length > configuration.maxBodyBytes {
        exchange.bodyTooLarge = true
        exchange.request.body = []
        return 0
      }
      if let input, length > 0 {
        exchange.request.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
      }
      return 0

    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
      guard let exchange = exchanges[dt_lws_get_id(wsi)] else { return -1 }
      if exchange.bodyTooLarge {
        exchange.closeAfterResponse = true
        exchange.setResponse(
          .error(
            HTTPError(
              status: 413, code: "too-large", message: "body exceeds \(configuration.maxBodyBytes) bytes")))
      } else if !exchange.hasResponse, !exchange.dispatched {
        // lws reports a body complete even for `Content-Length: 0`, already dispatched at its head.
        dispatch(exchange, on: loop)
      }
      return 0

    case LWS_CALLBACK_HTTP_WRITEABLE:
      let id = dt_lws_get_id(wsi)
      guard let exchange = exchanges[id] else { return 0 }
      switch exchange.writeNext(on: loop) {
      case .more:
        return 0
      case .failed:
        return -1
      case .done:
        exchanges.removeValue(forKey: id)
        if exchange.closeAfterResponse || loop.draining { return -1 }
        answeredConnections.insert(id)
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
      }

    case LWS_CALLBACK_CLOSED_HTTP:
      exchanges.removeValue(forKey: dt_lws_get_id(wsi))
      answeredConnections.remove(dt_lws_get_id(wsi))
      return 0

    default:
      return 0
    }
  }

  /// Answers before reading the body; the connection closes after, since unread body bytes would
  /// otherwise be parsed as the next request.
  private func startExchange(
    _ id: UInt64, _ wsi: OpaquePointer, _ request: HTTPRequest, early error: HTTPError, pipelined: Bool
  ) -> Int32 {
    // Refusing a request that follows another on its connection, with body bytes behind it,
    // made lws 4.1.6 spin on the network thread (every other client starved): such a connection
    // is closed at once, without an answer (RFC 9112 9.6 lets a server close a persistent
    // connection instead of answering).
    if pipelined { return -1 }
    let exchange = HTTPExchange(id: id, wsi: wsi, request: request)
    exchange.closeAfterResponse = true
    exchanges[id] = exchange
    exchange.setResponse(.error(error))
    return 0
  }

  private func dispatch(_ exchange: HTTPExchange, on loop: ServiceLoop) {
    exchange.dispatched = true
    let request = exchange.request
    let id = exchange.id
    let router = router
    Task {
      let response = await router.respond(to: request)
      loop.post(.respond(id, response))
    }
  }
}
