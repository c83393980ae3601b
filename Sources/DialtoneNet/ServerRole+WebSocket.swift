import CLibWebSockets

extension ServerRole {
  /// Accepts a WebSocket upgrade: the 101 leaves, the connection becomes a `ServerWebSocket`,
  /// and whatever the client sent right after its request is read as frames.
  func upgrade(_ http: HTTPConnection, _ head: HTTPRequestHead, _ response: [UInt8], on loop: ServiceLoop) {
    let id = http.id
    let wsi = http.wsi
    guard response.withUnsafeBytes({ loop.writeRaw(wsi, $0) }) else {
      lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
      return
    }
    http.disarm()
    let leftover = http.reader.takeAll()
    httpConnections.removeValue(forKey: id)
    let request = UpgradeRequest(
      path: head.path, query: head.query, headers: head.forwardedHeaders, remoteAddress: loop.peerAddress(wsi))
    let socket = ServerWebSocket(
      id: id, wsi: wsi, isTLS: http.isTLS, maxMessageBytes: loop.maxMessageBytes,
      maxQueuedBytes: configuration.maxQueuedBytes,
      connection: WebSocketConnection(id: id, remoteAddress: request.remoteAddress, loop: loop))
    socket.lastActivityTick = loop.tick
    webSockets[id] = socket
    Self.attach(socket, to: wsi)
    socket.connection.socket = socket
    if loop.draining { socket.requestClose(code: WebSocketCloseCode.goingAway, reason: "server shutting down") }
    webSocketHandler.webSocketOpened(socket.connection, request: request)
    let alive = leftover.isEmpty || leftover.withUnsafeBytes { webSocketReceived(socket, $0, on: loop) }
    if !alive || !socket.pump(on: loop) {
      lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }
  }

  /// Frames arrived; false when the connection must close now.
  func webSocketReceived(_ socket: ServerWebSocket, _ input: UnsafeRawBufferPointer, on loop: ServiceLoop) -> Bool {
    socket.receive(input, on: loop) { message, isText in
      webSocketHandler.webSocketReceived(socket.connection, message: message, isText: isText)
      // A busy loop releases held frames and owed keepalive pings as it goes; the ticker and
      // the sweep only cover quiet spells.
      releaseCoalesced(on: loop)
      loop.receivedMessage()
    }
  }

  func webSocketClosed(_ socket: ServerWebSocket) {
    webSocketHandler.webSocketClosed(socket.connection, code: socket.peerCloseCode)
  }
}
