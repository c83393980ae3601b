import CLibWebSockets
import DialtoneSupport
import Foundation

struct ClientConnectRequest: Sendable {
  let id: UInt64
  let host: String
  let port: Int
  let path: String
  let useTLS: Bool
  let allowSelfSigned: Bool
  let headers: [HTTPHeaderField]
  let onEvent: @Sendable (WebSocketClientEvent) -> Void
}

/// Service-thread state of one client connection, from connect to close.
final class ClientSession {
  let request: ClientConnectRequest
  var session: WebSocketSession?
  var wsi: OpaquePointer?
  /// Sends issued before the handshake completed.
  var pendingSends: [([UInt8], Bool)] = []
  var closeRequested: (UInt16, String)?
  /// lws may keep pointers to these until the connection ends.
  var cStrings: [UnsafeMutablePointer<CChar>] = []

  init(request: ClientConnectRequest) { self.request = request }
  deinit { for string in cStrings { free(string) } }

  func enqueue(_ bytes: [UInt8], binary: Bool, on loop: ServiceLoop) {
    if let session { session.enqueue(bytes, binary: binary, on: loop) } else { pendingSends.append((bytes, binary)) }
  }
}

/// The client side of a loop: outgoing WebSocket connections, from connect to close.
final class ClientRole: ServiceRole {
  var clients: [UInt64: ClientSession] = [:]

  /// Client ids are handed out on the caller's thread, before the connect reaches the loop.
  private static let lastClientID = Locked<UInt64>(0)

  static func reserveClientID() -> UInt64 {
    Self.lastClientID.withLock {
      $0 += 1
      return $0
    }
  }

  func openClient(_ request: ClientConnectRequest, on loop: ServiceLoop) {
    guard let context = loop.context, !loop.draining else {
      request.onEvent(.failed("client is shut down"))
      return
    }
    let client = ClientSession(request: request)
    func keep(_ string: String) -> UnsafePointer<CChar>? {
      guard let copy = strdup(string) else { return nil }
      client.cStrings.append(copy)
      return UnsafePointer(copy)
    }
    var info = lws_client_connect_info()
    info.context = context
    info.address = keep(request.host)
    info.port = Int32(request.port)
    info.path = keep(request.path)
    info.host = keep(request.port == 80 || request.port == 443 ? request.host : "\(request.host):\(request.port)")
    info.origin = info.host
    info.local_protocol_name = keep("dialtone")
    if request.useTLS {
      var flags = Int32(LCCSCF_USE_SSL.rawValue)
      if request.allowSelfSigned {
        flags |=
          Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue) | Int32(LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue)
          | Int32(LCCSCF_ALLOW_EXPIRED.rawValue)
      }
      info.ssl_connection = flags
    }
    info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: UInt(request.id))
    // Registered before connecting: lws may report a connection error synchronously.
    clients[request.id] = client
    let wsi = lws_client_connect_via_info(&info)
    if wsi == nil, clients.removeValue(forKey: request.id) != nil {
      request.onEvent(.failed("cannot connect to \(request.host):\(request.port)"))
    } else {
      client.wsi = wsi
    }
  }

  func closeClient(_ client: ClientSession, code: UInt16, reason: String) {
    if let session = client.session {
      session.requestClose(code: code, reason: reason)
    } else if let wsi = client.wsi {
      // Still connecting or in the handshake: there is no close frame to send, so the attempt is
      // abandoned (lws reports it as a connection error). Waiting instead can take lws's own
      // timeout, 20 s or more, on a connection whose server went away mid-handshake.
      client.closeRequested = (code, reason)
      lws_set_timeout(wsi, PENDING_TIMEOUT_AWAITING_SERVER_RESPONSE, LWS_TO_KILL_ASYNC)
    } else {
      client.closeRequested = (code, reason)
    }
  }

  func handle(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int,
    on loop: ServiceLoop
  ) -> Int32? {
    switch reason {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER, LWS_CALLBACK_CLIENT_ESTABLISHED,
      LWS_CALLBACK_CLIENT_RECEIVE, LWS_CALLBACK_CLIENT_WRITEABLE, LWS_CALLBACK_CLIENT_CONNECTION_ERROR,
      LWS_CALLBACK_CLIENT_CLOSED:
      return handleClient(wsi, reason, input, length, on: loop)
    case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
      clients[dt_lws_get_id(wsi)]?.session?.lastActivityTick = loop.tick
      return 0
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
      // A close payload is empty or a 2-byte code plus reason (RFC 6455 §5.5.1); lws 4.1 echoes a
      // 1-byte one back as it came. Refuse it with 1002: lws sends the reason set here.
      if length == 1 {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_PROTOCOL_ERR, nil, 0)
        return -1
      }
      var code: UInt16?
      if let input, length >= 2 {
        let bytes = input.assumingMemoryBound(to: UInt8.self)
        code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
      }
      clients[dt_lws_get_id(wsi)]?.session?.peerSentClose(code: code)
      return 0
    case LWS_CALLBACK_WSI_DESTROY:
      // The last word on every connection. One that ended before its handshake did (abandoned
      // by `closeClient`, or timed out by lws mid-handshake) gets no other callback from lws 4.1:
      // without this, whoever waits for it would wait for ever.
      let id = dt_lws_get_id(wsi)
      if let client = clients[id] {
        end(
          id,
          client.session == nil
            ? .failed("the connection ended before the WebSocket handshake")
            : .closed(code: client.session?.peerCloseCode))
      }
      return nil
    default:
      return nil
    }
  }

  private func handleClient(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons,
    _ input: UnsafeMutableRawPointer?, _ length: Int, on loop: ServiceLoop
  ) -> Int32 {
    let id = dt_lws_get_id(wsi)
    guard let client = clients[id] else { return reason == LWS_CALLBACK_CLIENT_CLOSED ? 0 : -1 }
    switch reason {
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
      guard let input else { return 0 }
      let cursor = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
      guard let start = cursor.pointee else { return -1 }
      let end = start + length
      for field in client.request.headers {
        guard field.append(to: wsi, cursor: &cursor.pointee, end: end) else { return -1 }
      }
      return 0

    case LWS_CALLBACK_CLIENT_ESTABLISHED:
      let session = WebSocketSession(id: id, wsi: wsi, maxMessageBytes: loop.maxMessageBytes)
      session.lastActivityTick = loop.tick
      client.session = session
      client.request.onEvent(.opened)
      // Still inside the handshake callback: these go through the writable callback.
      for (bytes, binary) in client.pendingSends { session.enqueue(bytes, binary: binary, on: loop) }
      session.isEstablished = true
      client.pendingSends = []
      if let (code, text) = client.closeRequested { session.requestClose(code: code, reason: text) }
      if loop.draining { session.requestClose(code: WebSocketCloseCode.goingAway, reason: "") }
      return 0

    case LWS_CALLBACK_CLIENT_RECEIVE:
      guard let session = client.session else { return -1 }
      session.lastActivityTick = loop.tick
      switch session.receive(input, length) {
      case .partial, .discarded: return 0
      case .tooBig: return session.rejectTooBig()
      case .message(let bytes, let isText):
        session.deliver { client.request.onEvent(.message(bytes, isText: isText)) }
        loop.receivedMessage()
        return 0
      }

    case LWS_CALLBACK_CLIENT_WRITEABLE:
      return client.session?.writable(on: loop) ?? 0

    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
      end(id, .failed(input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"))
      return 0

    case LWS_CALLBACK_CLIENT_CLOSED:
      end(id, .closed(code: client.session?.peerCloseCode))
      return 0

    default:
      return 0
    }
  }

  /// A connection leaves the table with its last event, whichever lws callback comes first:
  /// each connection's handler hears exactly one `.failed` or `.closed`.
  private func end(_ id: UInt64, _ event: WebSocketClientEvent) {
    clients.removeValue(forKey: id)?.request.onEvent(event)
  }

  func configure(_ info: inout lws_context_creation_info) {
    info.port = CONTEXT_PORT_NO_LISTEN
    info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
  }

  func started(on loop: ServiceLoop) {}
  func contextDestroyed() {}

  func stopped() { clients.removeAll() }

  func execute(_ command: ServiceLoop.Command, on loop: ServiceLoop) {
    if case .connect(let request) = command { openClient(request, on: loop) }
  }

  func session(_ id: UInt64) -> (any KeepaliveSocket)? { clients[id]?.session }

  func send(_ id: UInt64, _ bytes: [UInt8], binary: Bool, coalesced: Bool, on loop: ServiceLoop) {
    // A client has no coalescing: every message leaves at once.
    clients[id]?.enqueue(bytes, binary: binary, on: loop)
  }

  func close(_ id: UInt64, code: UInt16, reason: String, on loop: ServiceLoop) {
    guard let client = clients[id] else { return }
    closeClient(client, code: code, reason: reason)
  }

  func forEachSession(_ body: (any KeepaliveSocket) -> Void) {
    for client in clients.values { if let session = client.session { body(session) } }
  }

  func beginDrain(on loop: ServiceLoop) {
    for client in clients.values { closeClient(client, code: WebSocketCloseCode.goingAway, reason: "") }
  }

  var isIdle: Bool { clients.isEmpty }
}

extension HTTPHeaderField {
  /// Appends `name: value` to a header block lws is building (the client's upgrade request).
  func append(to wsi: OpaquePointer, cursor: inout UnsafeMutablePointer<UInt8>?, end: UnsafeMutablePointer<UInt8>)
    -> Bool
  {
    let nameBytes = Array((name.lowercased() + ":").utf8) + [0]
    let valueBytes = Array(value.utf8)
    return nameBytes.withUnsafeBufferPointer { n in
      valueBytes.withUnsafeBufferPointer { v in
        lws_add_http_header_by_name(wsi, n.baseAddress, v.baseAddress, Int32(v.count), &cursor, end) == 0
      }
    }
  }
}
