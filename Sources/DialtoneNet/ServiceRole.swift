import CLibWebSockets

/// What a network loop serves: the connections, commands and lws callbacks that differ between
/// a server (`ServerRole`) and a client (`ClientRole`). The loop (`ServiceLoop`) owns the lws
/// context, the network thread, the inbox, keepalive and draining; every method here runs on
/// that thread.
protocol ServiceRole: AnyObject {
  /// How this role's lws context is set up (listening, TLS).
  func configure(_ info: inout lws_context_creation_info)
  /// The network thread started (timers may start) or stopped (forget every connection).
  func started(on loop: ServiceLoop)
  func stopped()
  /// The context is gone (every wsi freed): objects its wsis pointed at may go.
  func contextDestroyed()

  /// The role's own lws callbacks; nil when `reason` is not one of them.
  func handle(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int,
    on loop: ServiceLoop
  ) -> Int32?
  /// Commands only this role understands (`.respond`, `.connect`, `.adopt`, …).
  func execute(_ command: ServiceLoop.Command, on loop: ServiceLoop)

  /// The WebSocket of connection `id`, once open.
  func session(_ id: UInt64) -> (any KeepaliveSocket)?
  func send(_ id: UInt64, _ bytes: [UInt8], binary: Bool, coalesced: Bool, on loop: ServiceLoop)
  func close(_ id: UInt64, code: UInt16, reason: String, on loop: ServiceLoop)
  /// Visits every open WebSocket, for keepalive (without copying them: a server holds thousands).
  func forEachSession(_ body: (any KeepaliveSocket) -> Void)

  /// Shutdown began: stop accepting, ask every connection to close.
  func beginDrain(on loop: ServiceLoop)
  /// Nothing is open any more: the loop may stop.
  var isIdle: Bool { get }
}

/// A WebSocket as keepalive sees it (`ServiceLoop.sweepIdleSockets`): the client's
/// (`WebSocketSession`, framed by lws) and the server's (`ServerWebSocket`, framed here).
protocol KeepaliveSocket: AnyObject {
  var id: UInt64 { get }
  /// The sweep tick of the last frame received (any frame, pong included, is activity).
  var lastActivityTick: UInt32 { get set }
  /// Sends a ping now, or as soon as the socket can take one.
  func requestPing(on loop: ServiceLoop)
  /// Quiet past the idle timeout: the peer vanished without a FIN, the socket is dropped.
  func dropIdle()
}
