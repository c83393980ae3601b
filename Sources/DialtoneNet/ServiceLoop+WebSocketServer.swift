import CLibWebSockets

extension ServiceLoop {
  func handleServerWebSocket(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons,
    _ input: UnsafeMutableRawPointer?, _ length: Int
  ) -> Int32 {
    guard let server else { return 0 }
    switch reason {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
      // Upgrade headers are only readable here; keep what authentication needs.
      let previous = dt_lws_get_id(wsi)
      if previous != 0 { exchanges.removeValue(forKey: previous) }
      let target = requestTarget(wsi)
      guard !draining, target.path == server.configuration.webSocketPath else { return 1 }
      let id = allocateID(for: wsi)
      pendingUpgrades[id] = UpgradeRequest(
        path: target.path, query: target.query, headers: readHeaders(wsi),
        remoteAddress: peerAddress(wsi))
      return 0

    case LWS_CALLBACK_ESTABLISHED:
      let id = dt_lws_get_id(wsi)
      let request = pendingUpgrades.removeValue(forKey: id) ?? UpgradeRequest(path: server.configuration.webSocketPath)
      let session = WebSocketSession(id: id, wsi: wsi, maxMessageBytes: maxMessageBytes)
      session.lastActivityTick = tick
      session.connection = WebSocketConnection(id: id, remoteAddress: request.remoteAddress, loop: self)
      webSockets[id] = session
      if draining { session.requestClose(code: WebSocketCloseCode.goingAway, reason: "server shutting down") }
      if let connection = session.connection { server.webSocketHandler.webSocketOpened(connection, request: request) }
      session.isEstablished = true
      return 0

    case LWS_CALLBACK_RECEIVE:
      guard let session = webSockets[dt_lws_get_id(wsi)] else { return -1 }
      session.lastActivityTick = tick
      switch session.receive(input, length) {
      case .partial:
        return 0
      case .tooBig:
        return session.rejectTooBig()
      case .message(let bytes, let isText):
        if let connection = session.connection {
          server.webSocketHandler.webSocketReceived(connection, message: bytes, isText: isText)
        }
        // A busy loop releases held frames as it goes; the ticker only covers quiet spells.
        releaseCoalesced()
        return 0
      }

    case LWS_CALLBACK_SERVER_WRITEABLE:
      guard let session = webSockets[dt_lws_get_id(wsi)] else { return 0 }
      return session.writable(on: self)

    case LWS_CALLBACK_CLOSED:
      let id = dt_lws_get_id(wsi)
      pendingUpgrades.removeValue(forKey: id)
      if let session = webSockets.removeValue(forKey: id), let connection = session.connection {
        server.webSocketHandler.webSocketClosed(connection, code: session.peerCloseCode)
      }
      return 0

    default:
      return 0
    }
  }
}
