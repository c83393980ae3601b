import CLibWebSockets
import DialtoneSupport
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The server side of a loop: HTTP exchanges, accepted WebSockets (with coalesced sends), and
/// the sockets `Listener` accepts.
final class ServerRole: ServiceRole {
  let configuration: WebServerConfiguration
  let router: Router
  let webSocketHandler: any WebSocketHandler
  /// The listening socket, owned here rather than by lws (see `Listener`); set before the loop starts.
  var listener: Listener?

  var webSockets: [UInt64: WebSocketSession] = [:]
  var exchanges: [UInt64: HTTPExchange] = [:]
  var pendingUpgrades: [UInt64: UpgradeRequest] = [:]
  /// HTTP connections that have had a request answered (see `handleHTTP`).
  var answeredConnections: Set<UInt64> = []

  /// How long a coalesced message may wait for company, and the sockets holding some, oldest
  /// first, each with the time its wait ends (see ServerRole+Coalescing.swift).
  var coalescingDelay: Double { configuration.coalescingDelay }
  var holding = FIFOQueue<(session: WebSocketSession, deadline: UInt64)>()
  var coalescingTicker: DispatchSourceTimer?
  var tickerRunning = false

  /// C copies of the TLS file paths for lws (see `configure`).
  private var tlsPaths: (certificate: UnsafeMutablePointer<CChar>?, key: UnsafeMutablePointer<CChar>?)?

  deinit {
    free(tlsPaths?.certificate)
    free(tlsPaths?.key)
  }

  init(configuration: WebServerConfiguration, router: Router, webSocketHandler: any WebSocketHandler) {
    self.configuration = configuration
    self.router = router
    self.webSocketHandler = webSocketHandler
  }

  func configure(_ info: inout lws_context_creation_info) {
    // A server vhost that does not listen: `Listener` accepts and the loop adopts the sockets.
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER
    if let tls = configuration.tls {
      // Adopted sockets get TLS when the vhost has a certificate (lws_adopt_socket allows SSL).
      // lws reads the files while the context is created; the strings live until deinit.
      info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
      tlsPaths = (strdup(tls.certificateChain), strdup(tls.privateKey))
      info.ssl_cert_filepath = UnsafePointer(tlsPaths?.certificate)
      info.ssl_private_key_filepath = UnsafePointer(tlsPaths?.key)
    }
    // lws 4.1's default table is 4 KiB: a long bearer token plus a browser's headers overflowed it.
    info.max_http_header_data = UInt16(clamping: min(max(configuration.maxHeaderBytes, 1024), 65535))
  }

  func started(on loop: ServiceLoop) {
    guard coalescingDelay > 0 else { return }
    let ticker = DispatchSource.makeTimerSource()
    // Under traffic every received message releases what is due: a tick then has nothing to
    // do, and waking the loop for it (an eventfd write and an extra epoll pass, 1/4 of the
    // delay apart) is pure cost, and under CPU contention another chance to be scheduled late.
    ticker.setEventHandler { [weak loop] in
      guard let loop, !loop.trafficSinceTimer.exchange(false, ordering: .relaxed) else { return }
      _ = loop.post(.coalescingTick)
    }
    ticker.resume()
    coalescingTicker = ticker
  }

  func stopped() {
    coalescingTicker?.cancel()
    listener?.stop()
    webSockets.removeAll()
    exchanges.removeAll()
    pendingUpgrades.removeAll()
    answeredConnections.removeAll()
  }

  func handle(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int,
    on loop: ServiceLoop
  ) -> Int32? {
    switch reason {
    case LWS_CALLBACK_HTTP, LWS_CALLBACK_HTTP_BODY, LWS_CALLBACK_HTTP_BODY_COMPLETION,
      LWS_CALLBACK_HTTP_WRITEABLE, LWS_CALLBACK_CLOSED_HTTP:
      return handleHTTP(wsi, reason, input, length, on: loop)
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION, LWS_CALLBACK_ESTABLISHED, LWS_CALLBACK_RECEIVE,
      LWS_CALLBACK_SERVER_WRITEABLE, LWS_CALLBACK_CLOSED:
      return handleWebSocket(wsi, reason, input, length, on: loop)
    default:
      return nil
    }
  }

  func execute(_ command: ServiceLoop.Command, on loop: ServiceLoop) {
    switch command {
    case .respond(let id, let response):
      exchanges[id]?.setResponse(response)
    case .coalescingTick:
      releaseCoalesced(tick: true, on: loop)
    case .adopt(let sockets):
      for fd in sockets {
        guard !loop.draining, let context = loop.context else {
          Glibc.close(fd)
          continue
        }
        // A failed adoption has closed the socket already (every failure path of
        // lws_adopt_descriptor_vhost_via_info does): closing it here again would close
        // whatever descriptor reused the number meanwhile, another connection's or a database's.
        _ = lws_adopt_socket(context, fd)
      }
    default:
      break
    }
  }

  func session(_ id: UInt64) -> WebSocketSession? { webSockets[id] }

  func send(_ id: UInt64, _ bytes: [UInt8], binary: Bool, coalesced: Bool, on loop: ServiceLoop) {
    guard let session = webSockets[id] else { return }
    if coalesced { hold(bytes, on: session, loop: loop) } else { session.enqueue(bytes, binary: binary, on: loop) }
  }

  func close(_ id: UInt64, code: UInt16, reason: String) {
    webSockets[id]?.requestClose(code: code, reason: reason)
  }

  func forEachSession(_ body: (WebSocketSession) -> Void) {
    for session in webSockets.values { body(session) }
  }

  func beginDrain(on loop: ServiceLoop) {
    listener?.stop()
    for session in webSockets.values {
      session.requestClose(code: WebSocketCloseCode.goingAway, reason: "server shutting down")
    }
  }

  var isIdle: Bool { webSockets.isEmpty && exchanges.isEmpty }
}
