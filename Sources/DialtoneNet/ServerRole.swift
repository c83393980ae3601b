import CLibWebSockets
import DialtoneSupport
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The server side of a loop: the sockets `Listener` accepts, adopted into lws as raw sockets
/// (lws runs the event loop, TLS and timeouts); their HTTP/1.1 and WebSocket protocols are
/// spoken here (`HTTPConnection`, `ServerWebSocket`), with coalesced sends.
final class ServerRole: ServiceRole {
  let configuration: WebServerConfiguration
  let router: Router
  let webSocketHandler: any WebSocketHandler
  /// The listening socket, owned here rather than by lws (see `Listener`); set before the loop starts.
  var listener: Listener?

  /// Every accepted socket is in exactly one of these: HTTP until an upgrade, then WebSocket.
  var httpConnections: [UInt64: HTTPConnection] = [:]
  var webSockets: [UInt64: ServerWebSocket] = [:]

  /// How long a coalesced message may wait for company, the sockets holding some, oldest
  /// first, each with the time its wait ends, and the loop's timer for quiet spells (see
  /// ServerRole+Coalescing.swift).
  var coalescingDelay: Double { configuration.coalescingDelay }
  var holding = FIFOQueue<HeldFrames>()
  var coalescingSchedule: CoalescingSchedule
  var coalescingTimerWSI: OpaquePointer?
  var coalescingTimerFailed = false
  /// How many times the coalescing timer expired (tests: each arming expires once).
  var coalescingTimerExpiries = 0
  /// Set once the loop has stopped: lws may still report sockets closing, which no longer concern anyone.
  private var retired = false

  /// C copies of the TLS file paths and the ALPN list for lws (see `configure`).
  private var tlsPaths: (certificate: UnsafeMutablePointer<CChar>?, key: UnsafeMutablePointer<CChar>?)?
  private let alpn = strdup("http/1.1")

  deinit {
    free(tlsPaths?.certificate)
    free(tlsPaths?.key)
    free(alpn)
  }

  init(configuration: WebServerConfiguration, router: Router, webSocketHandler: any WebSocketHandler) {
    self.configuration = configuration
    self.router = router
    self.webSocketHandler = webSocketHandler
    coalescingSchedule = CoalescingSchedule(slack: UInt64(configuration.coalescingDelay * 0.25e9))
  }

  func configure(_ info: inout lws_context_creation_info) {
    // A server vhost that does not listen: `Listener` accepts and the loop adopts the sockets.
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER
    if let tls = configuration.tls {
      // Adopted sockets get TLS when the vhost has a certificate (LWS_ADOPT_ALLOW_SSL).
      // lws reads the files while the context is created; the strings live until deinit.
      info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
      tlsPaths = (strdup(tls.certificateChain), strdup(tls.privateKey))
      info.ssl_cert_filepath = UnsafePointer(tlsPaths?.certificate)
      info.ssl_private_key_filepath = UnsafePointer(tlsPaths?.key)
      // Only HTTP/1.1 is spoken here: a client offered h2 must not get it (lws would switch
      // the socket to its own HTTP/2 role).
      info.alpn = UnsafePointer(alpn)
    }
    // Reads of up to this size per callback (one buffer for the whole loop, not per socket).
    info.pt_serv_buf_size = 16 * 1024
  }

  func started(on loop: ServiceLoop) {}

  func stopped() {
    retired = true
    listener?.stop()
    // The objects stay until the context is destroyed (their wsis point at them until lws
    // frees the wsis): `contextDestroyed` lets them go.
    for socket in webSockets.values { socket.connection.socket = nil }
  }

  func contextDestroyed() {
    webSockets.removeAll()
    httpConnections.removeAll()
  }

  func handle(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int,
    on loop: ServiceLoop
  ) -> Int32? {
    guard !retired else { return reason == LWS_CALLBACK_RAW_ADOPT ? -1 : 0 }
    switch reason {
    case LWS_CALLBACK_RAW_ADOPT:
      let id = loop.allocateID()
      let connection = HTTPConnection(
        id: id, wsi: wsi, isTLS: configuration.tls != nil, maxHeadBytes: configuration.maxHeaderBytes)
      httpConnections[id] = connection
      Self.attach(connection, to: wsi)
      connection.wait(for: .head)
      return 0
    case LWS_CALLBACK_RAW_RX:
      let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
      switch Self.owner(of: wsi) {
      case .webSocket(let socket): return webSocketReceived(socket, bytes, on: loop) ? 0 : -1
      case .http(let connection): return httpReceived(connection, bytes, on: loop) ? 0 : -1
      case nil: return -1
      }
    case LWS_CALLBACK_RAW_WRITEABLE:
      switch Self.owner(of: wsi) {
      case .webSocket(let socket): return socket.writable(on: loop)
      case .http(let connection): return httpWritable(connection, on: loop)
      case nil: return 0
      }
    case LWS_CALLBACK_RAW_CLOSE:
      let owner = Self.owner(of: wsi)
      lws_set_opaque_user_data(wsi, nil)
      switch owner {
      case .webSocket(let socket):
        webSockets.removeValue(forKey: socket.id)
        socket.connection.socket = nil
        webSocketClosed(socket)
      case .http(let connection):
        httpConnections.removeValue(forKey: connection.id)
      case nil:
        break
      }
      return 0
    case LWS_CALLBACK_RAW_RX_FILE:
      if let timer = coalescingTimerWSI, timer == wsi { coalescingTimerExpired(timer, on: loop) }
      return 0
    case LWS_CALLBACK_RAW_CLOSE_FILE:
      if coalescingTimerWSI == wsi { coalescingTimerWSI = nil }
      return 0
    default:
      return nil
    }
  }

  /// What serves an accepted socket: its HTTP connection until an upgrade, then its WebSocket.
  enum SocketOwner {
    case http(HTTPConnection)
    case webSocket(ServerWebSocket)
  }

  /// Points the socket's lws user data at the object that serves it, so that every callback
  /// finds it without a look-up by id (a hash and, among 10k sockets, cache misses). Unretained:
  /// `httpConnections` or `webSockets` holds the object until lws reports the socket closed,
  /// and the pointer is cleared then (`RAW_CLOSE`).
  static func attach(_ owner: AnyObject, to wsi: OpaquePointer) {
    lws_set_opaque_user_data(wsi, Unmanaged.passUnretained(owner).toOpaque())
  }

  static func owner(of wsi: OpaquePointer) -> SocketOwner? {
    guard let pointer = lws_get_opaque_user_data(wsi) else { return nil }
    let object = Unmanaged<AnyObject>.fromOpaque(pointer).takeUnretainedValue()
    if let socket = object as? ServerWebSocket { return .webSocket(socket) }
    if let connection = object as? HTTPConnection { return .http(connection) }
    return nil
  }

  func execute(_ command: ServiceLoop.Command, on loop: ServiceLoop) {
    switch command {
    case .respond(let id, let response):
      respond(id, response, on: loop)
    case .adopt(let sockets):
      for fd in sockets {
        guard !loop.draining, let context = loop.context else {
          Glibc.close(fd)
          continue
        }
        // A failed adoption has closed the socket already (every failure path of
        // lws_adopt_descriptor_vhost_via_info does): closing it here again would close
        // whatever descriptor reused the number meanwhile, another connection's or a database's.
        _ = dt_lws_adopt_raw(context, fd, configuration.tls != nil ? 1 : 0)
      }
    default:
      break
    }
  }

  func session(_ id: UInt64) -> (any KeepaliveSocket)? { webSockets[id] }

  func send(_ id: UInt64, _ bytes: [UInt8], binary: Bool, coalesced: Bool, on loop: ServiceLoop) {
    guard let socket = webSockets[id] else { return }
    send(to: socket, bytes, binary: binary, coalesced: coalesced, on: loop)
  }

  func send(to socket: ServerWebSocket, _ bytes: [UInt8], binary: Bool, coalesced: Bool, on loop: ServiceLoop) {
    if coalesced { hold(bytes, on: socket, loop: loop) } else { socket.enqueue(bytes, binary: binary, on: loop) }
  }

  func close(_ id: UInt64, code: UInt16, reason: String, on loop: ServiceLoop) {
    guard let socket = webSockets[id] else { return }
    socket.requestClose(code: code, reason: reason)
    if !socket.pump(on: loop) { socket.dropIdle() }
  }

  func forEachSession(_ body: (any KeepaliveSocket) -> Void) {
    for socket in webSockets.values { body(socket) }
  }

  func beginDrain(on loop: ServiceLoop) {
    listener?.stop()
    for socket in webSockets.values {
      socket.requestClose(code: WebSocketCloseCode.goingAway, reason: "server shutting down")
      if !socket.pump(on: loop) { socket.dropIdle() }
    }
  }

  /// No WebSocket (open or closing) and no request being answered.
  var isIdle: Bool { webSockets.isEmpty && !httpConnections.values.contains { $0.exchange != nil } }
}
