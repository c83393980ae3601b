import CLibWebSockets
import DialtoneSupport

/// Service-thread state of one client WebSocket (framed by lws's client role): the outgoing
/// queue, the reassembly buffer for fragmented messages, and a pending close. The server's
/// sockets are `ServerWebSocket`.
final class WebSocketSession: KeepaliveSocket {
  enum Received {
    case partial
    case message([UInt8], isText: Bool)
    case tooBig
    /// Data after the peer's close frame: the close is its last frame (RFC 6455 §5.5.1), so what
    /// follows is dropped, not delivered.
    case discarded
  }

  let id: UInt64
  let wsi: OpaquePointer
  private let maxMessageBytes: Int
  /// Bytes waiting here for a reader that lags; over `maxQueuedBytes` the
  /// socket is closed with `WebSocketCloseCode.tooSlow` rather than growing without bound.
  private let maxQueuedBytes: Int
  private(set) var queuedBytes = 0
  /// What waits for the writable callback: a message, framed (and masked) by lws.
  private struct Outgoing {
    let bytes: [UInt8]
    let binary: Bool
    var size: Int { bytes.count }
  }
  private var queue = FIFOQueue<Outgoing>()
  private var rx: [UInt8] = []
  private var receivingMessage = false
  private var closeRequest: (code: UInt16, reason: String)?
  private(set) var peerCloseCode: UInt16?
  /// The peer's close frame arrived: lws answers it, and nothing more is received or sent.
  private(set) var peerClosed = false
  /// Set while the handler runs for a message this socket received (see `deliver`).
  private var delivering = false
  /// Keepalive bookkeeping, in the loop's coarse sweep ticks (see `ServiceLoop.sweepIdleSockets`).
  var lastActivityTick: UInt32 = 0
  private var pingDue = false
  private var closeFrameSent = false
  /// lws's private LWS_WRITE_CLOSE (4): the public header removed it in favour of lws_close_reason().
  private static let writeClose = lws_write_protocol(rawValue: 4)
  /// The public handle, for server-side sockets.
  var connection: WebSocketConnection?

  init(id: UInt64, wsi: OpaquePointer, maxMessageBytes: Int, maxQueuedBytes: Int = .max) {
    self.id = id
    self.wsi = wsi
    self.maxMessageBytes = maxMessageBytes
    self.maxQueuedBytes = maxQueuedBytes
  }

  /// Writes at once when nothing is queued and lws holds no unsent bytes for this socket (a check
  /// of lws state, unlike lws_send_pipe_choked, which costs a poll() per call); otherwise queues for the
  /// next writable callback. Writing directly skips two poll-mask changes per message (libuv
  /// turns each into epoll_ctl calls), which dominated the cost of small messages.
  func enqueue(_ bytes: [UInt8], binary: Bool, on loop: ServiceLoop) {
    guard closeRequest == nil, !peerClosed else { return }
    dispatch(Outgoing(bytes: bytes, binary: binary), on: loop)
  }

  /// Writes now when the socket can take it, otherwise queues for the writable callback.
  private func dispatch(_ item: Outgoing, on loop: ServiceLoop) {
    if canWriteNow {
      if !write(item, on: loop) { requestClose(code: 1011, reason: "") }
    } else {
      append(item)
    }
  }

  private func write(_ item: Outgoing, on loop: ServiceLoop) -> Bool {
    loop.write(wsi, item.bytes[...], item.binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT)
  }

  private var canWriteNow: Bool {
    queue.isEmpty && !pingDue && isEstablished && !delivering && lws_partial_buffered(wsi) == 0
  }

  /// Runs the handler of a message this socket received. A reply sent from inside it waits for
  /// the writable callback instead of being written at once: the same read may have carried a
  /// ping (or a close) that lws owes an answer to, and lws writes those first in its writable
  /// pass (RFC 6455 §5.5.2; Autobahn 5.6–5.8, 5.19, 5.20). lws reports no pings to us, so
  /// "inside a receive" is the only reliable sign that one may be owed.
  func deliver(_ handler: () -> Void) {
    delivering = true
    handler()
    delivering = false
  }

  /// lws reported the peer's close frame (`code` when it carried one; lws has already replaced
  /// an invalid code with 1002).
  func peerSentClose(code: UInt16?) {
    peerClosed = true
    peerCloseCode = code
    queue = FIFOQueue()
    queuedBytes = 0
  }

  private func append(_ item: Outgoing) {
    queue.append(item)
    queuedBytes += item.size
    if queuedBytes > maxQueuedBytes { return overflow() }
    if queue.count == 1 { lws_callback_on_writable(wsi) }
  }

  /// The reader is too slow for what is sent to it: what waits is dropped (a server session
  /// keeps its own copy for resume) and the socket closes. Its kernel buffer is full, so the
  /// close frame may never leave: lws drops the socket a few seconds later regardless.
  private func overflow() {
    queue = FIFOQueue()
    queuedBytes = 0
    requestClose(code: WebSocketCloseCode.tooSlow, reason: "reading too slowly (over \(maxQueuedBytes) bytes queued)")
    lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, 3)
  }

  /// Set once the handshake completed (direct writes are only valid from then on).
  var isEstablished = false

  func requestClose(code: UInt16, reason: String) {
    // After the peer's close lws sends the answering close frame itself.
    guard closeRequest == nil, !peerClosed else { return }
    closeRequest = (code, reason)
    lws_callback_on_writable(wsi)
  }

  func dropIdle() {
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
  }

  /// lws does not report a pong with an empty payload, so pings carry one byte.
  private static let pingPayload: [UInt8] = [0x6b]

  /// Sends a WebSocket ping now, or on the next writable callback.
  func requestPing(on loop: ServiceLoop) {
    guard !pingDue, closeRequest == nil else { return }
    if canWriteNow {
      _ = loop.write(wsi, Self.pingPayload[...], LWS_WRITE_PING)
      return
    }
    pingDue = true
    lws_callback_on_writable(wsi)
  }

  /// One write per writable callback, as lws requires. Returns -1 when the socket must close.
  func writable(on loop: ServiceLoop) -> Int32 {
    if pingDue {
      pingDue = false
      guard loop.write(wsi, Self.pingPayload[...], LWS_WRITE_PING) else { return -1 }
      if !queue.isEmpty || closeRequest != nil { lws_callback_on_writable(wsi) }
      return 0
    }
    if let item = queue.popFirst() {
      queuedBytes -= item.size
      guard write(item, on: loop) else { return -1 }
      if !queue.isEmpty || closeRequest != nil { lws_callback_on_writable(wsi) }
      return 0
    }
    if let close = closeRequest {
      // lws 4.1 on libuv drops the close frame when a writable callback returns -1 after
      // lws_close_reason(), so the frame is written here and the socket dropped one callback later.
      if closeFrameSent { return -1 }
      let payload = [UInt8(close.code >> 8), UInt8(close.code & 0xff)] + Array(close.reason.utf8.prefix(120))
      guard loop.write(wsi, payload[...], Self.writeClose) else { return -1 }
      closeFrameSent = true
      lws_callback_on_writable(wsi)
    }
    return 0
  }

  /// Reassembles a message from the pieces lws hands over: frame fragments, and chunks of one
  /// frame when it is bigger than the receive buffer. The message ends at the final fragment
  /// with no payload left; its start is tracked here rather than trusting lws's first-fragment
  /// flag, which does not mark buffer-sized chunks consistently.
  func receive(_ input: UnsafeMutableRawPointer?, _ length: Int) -> Received {
    if peerClosed { return .discarded }
    // The common case, a whole message in one piece, skips the reassembly buffer.
    if !receivingMessage, length <= maxMessageBytes, lws_is_final_fragment(wsi) != 0,
      lws_remaining_packet_payload(wsi) == 0
    {
      let message = input.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
      return .message(message, isText: lws_frame_is_binary(wsi) == 0)
    }
    if !receivingMessage {
      receivingMessage = true
      rx.removeAll(keepingCapacity: rx.capacity <= 4096)
    }
    if rx.count + length > maxMessageBytes {
      rx = []
      receivingMessage = false
      return .tooBig
    }
    if let input, length > 0 {
      rx.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
    }
    guard lws_is_final_fragment(wsi) != 0, lws_remaining_packet_payload(wsi) == 0 else { return .partial }
    receivingMessage = false
    let message = rx
    rx.removeAll(keepingCapacity: rx.capacity <= 4096)
    return .message(message, isText: lws_frame_is_binary(wsi) == 0)
  }

  /// Closes at once with 1009: the oversize message is dropped, never delivered in part.
  func rejectTooBig() -> Int32 {
    var reason = Array("message too big".utf8)
    reason.withUnsafeMutableBufferPointer { b in
      lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, b.baseAddress, b.count)
    }
    return -1
  }
}
