import CLibWebSockets

extension ServerRole {
  func handleWebSocket(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons,
    _ input: UnsafeMutableRawPointer?, _ length: Int, on loop: ServiceLoop
  ) -> Int32 {
    switch reason {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
      // Upgrade headers are only readable here; keep what authentication needs.
      let previous = dt_lws_get_id(wsi)
      if previous != 0 { exchanges.removeValue(forKey: previous) }
      let target = requestTarget(wsi)
      guard !loop.draining, target.path == configuration.webSocketPath else { return 1 }
      let id = loop.allocateID(for: wsi)
      pendingUpgrades[id] = UpgradeRequest(
        path: target.path, query: target.query, headers: readHeaders(wsi),
        remoteAddress: loop.peerAddress(wsi))
      return 0

    case LWS_CALLBACK_ESTABLISHED:
      let id = dt_lws_get_id(wsi)
      let request = pendingUpgrades.removeValue(forKey: id) ?? UpgradeRequest(path: configuration.webSocketPath)
      let session = WebSocketSession(
        id: id, wsi: wsi, maxMessageBytes: loop.maxMessageBytes, maxQueuedBytes: configuration.maxQueuedBytes)
      session.lastActivityTick = loop.tick
      session.connection = WebSocketConnection(id: id, remoteAddress: request.remoteAddress, loop: loop)
      webSockets[id] = session
      if loop.draining { session.requestClose(code: WebSocketCloseCode.goingAway, reason: "server shutting down") }
      if let connection = session.connection { webSocketHandler.webSocketOpened(connection, request: request) }
      session.isEstablished = true
      return 0

    case LWS_CALLBACK_RECEIVE:
      guard let session = webSockets[dt_lws_get_id(wsi)] else { return -1 }
      session.lastActivityTick = loop.tick
      switch session.receive(input, length) {
      case .partial, .discarded:
        return 0
      case .tooBig:
        return session.rejectTooBig()
      case .message(let bytes, let isText):
        if let connection = session.connection {
          session.deliver { webSocketHandler.webSocketReceived(connection, message: bytes, isText: isText) }
        }
        // A busy loop releases held frames and owed keepalive pings as it goes; the ticker and
        // the sweep only cover quiet spells.
        releaseCoalesced(on: loop)
        loop.receivedMessage()
        return 0
      }

    case LWS_CALLBACK_SERVER_WRITEABLE:
      guard let session = webSockets[dt_lws_get_id(wsi)] else { return 0 }
      return session.writable(on: loop)

    case LWS_CALLBACK_CLOSED:
      let id = dt_lws_get_id(wsi)
      pendingUpgrades.removeValue(forKey: id)
      answeredConnections.remove(id)
      if let session = webSockets.removeValue(forKey: id), let connection = session.connection {
        webSocketHandler.webSocketClosed(connection, code: session.peerCloseCode)
      }
      return 0

    default:
      return 0
    }
  }
}
