import CLibWebSockets
import DialtoneSupport

#if canImport(Glibc)
  import Glibc
#endif

/// One server WebSocket after the handshake, on a socket lws serves raw: frames are read by
/// `WebSocketFrameParser` and written here, the end follows `WebSocketClosing`.
///
/// Outgoing messages are written at once when nothing waits ahead of them and lws holds no
/// unsent bytes for the socket; otherwise they queue for the writable callback (up to
/// `maxQueuedBytes`, then the socket closes with `WebSocketCloseCode.tooSlow`). Frames of one
/// read are handled in order, so a pong owed for a ping leaves before the reply to a message that
/// came after the ping, and after the reply to one that came before it (RFC 6455 §5.5.2;
/// Autobahn 5.6–5.8, 5.19, 5.20). Buffers are held only while something is partly received or
/// waiting to be sent: an idle socket holds none.
final class ServerWebSocket: KeepaliveSocket {
  let id: UInt64
  let wsi: OpaquePointer
  /// On TLS the socket is not half-closed (there is no way to send TLS's close_notify here):
  /// it just stops writing.
  private let isTLS: Bool
  private let maxQueuedBytes: Int
  private var parser: WebSocketFrameParser
  private enum Outgoing {
    /// One message, framed when written.
    case message([UInt8], binary: Bool)
    /// Frames already framed (released coalesced frames plus what followed them).
    case frames([UInt8])

    var size: Int {
      switch self {
      case .message(let bytes, _): return bytes.count
      case .frames(let bytes): return bytes.count
      }
    }
  }
  /// Everything a send or a read consults about what waits to be written and the closing, in one
  /// stored property: each access to a class's stored property the optimiser cannot prove
  /// exclusive is a runtime check, and a message sent read six of them one by one.
  private struct Outbox {
    var closing = WebSocketClosing()
    var queue = FIFOQueue<Outgoing>()
    var queuedBytes = 0
    /// Messages sent with `enqueueCoalesced`: they leave with the next message to this socket,
    /// in one write, or when the loop releases them, whichever comes first.
    var held = HeldMessages()
    /// Counts the times frames started to be held: names the current holding, so that the
    /// loop's list of holdings can tell one whose frames already left (`isHolding`).
    var holdings: UInt32 = 0
    var pingDue = false
    /// The payload of the last ping not yet answered (RFC 6455 §5.5.3: the latest one suffices).
    var pongOwed: [UInt8]?

    /// Nothing queued or owed: a message may be written now if lws holds no unsent bytes.
    var nothingWaiting: Bool { queue.isEmpty && !pingDue && pongOwed == nil }

    /// Open with nothing queued or owed: `pump`'s usual case.
    var isOpenAndIdle: Bool { closing.isOpen && nothingWaiting }

    enum Route { case closed, direct, general }

    /// Where a message sent now goes: nowhere (closed), straight out when lws takes it
    /// (`direct`: open, nothing held, queued or owed), or the general way.
    var route: Route {
      guard closing.isOpen else { return .closed }
      return held.isEmpty && nothingWaiting ? .direct : .general
    }

    enum Holding { case closed, overflows, starts, joins }

    /// `enqueueCoalesced`'s bookkeeping, in one access: holds the message unless closed;
    /// `overflows` when what waits is then past `maxQueuedBytes`.
    mutating func hold(_ bytes: [UInt8], binary: Bool, maxQueuedBytes: Int) -> Holding {
      guard closing.isOpen else { return .closed }
      let starts = held.isEmpty
      held.append(bytes, binary: binary)
      if queuedBytes + held.framedBytes > maxQueuedBytes { return .overflows }
      if starts { holdings &+= 1 }
      return starts ? .starts : .joins
    }

    /// Queues `item` for the writable callback; whether what waits is then past
    /// `maxQueuedBytes`, and whether the queue was empty before.
    mutating func queue(_ item: Outgoing, maxQueuedBytes: Int) -> (overflows: Bool, first: Bool) {
      queue.append(item)
      queuedBytes += item.size
      return (queuedBytes + held.framedBytes > maxQueuedBytes, queue.count == 1)
    }

    /// The oldest queued item, taken off the queue.
    mutating func popQueued() -> Outgoing? {
      guard let item = queue.popFirst() else { return nil }
      queuedBytes -= item.size
      return item
    }

    /// This side closes: whether it was open. What is held then goes ahead of the close
    /// (`dropQueued`: everything waiting is dropped instead); nothing is owed any more.
    mutating func close(code: UInt16, reason: [UInt8], dropQueued: Bool) -> Bool {
      guard closing.close(code: code, reason: reason) else { return false }
      if dropQueued {
        dropAll()
      } else if !held.isEmpty {
        let frames = held.framed()
        queue.append(.frames(frames))
        queuedBytes += frames.count
        held = HeldMessages()
      }
      pingDue = false
      pongOwed = nil
      return true
    }

    mutating func dropAll() {
      queue = FIFOQueue()
      held = HeldMessages()
      queuedBytes = 0
      pingDue = false
      pongOwed = nil
    }
  }
  private var out = Outbox()

  /// Changes `out` on the value moved out of the property and back, for the changes that call
  /// what the optimiser cannot see through (a queue growing or shrinking frees memory, which may
  /// run any code). An access to the property spanning such a call made every access to it a
  /// runtime exclusivity check, the reads each message sent or received makes included.
  /// `change` only changes the outbox.
  @discardableResult
  private func changeOut<Result>(_ change: (inout Outbox) -> Result) -> Result {
    var outbox = Outbox()
    swap(&outbox, &out)
    defer { swap(&outbox, &out) }
    return change(&outbox)
  }
  var queuedBytes: Int { out.queuedBytes }
  var holdings: UInt32 { out.holdings }
  /// Reading is paused while lws holds unsent bytes (see `noteWritten`).
  private var readingPaused = false
  var lastActivityTick: UInt32 = 0
  /// The peer's close code, when it sent a close frame with one.
  private(set) var peerCloseCode: UInt16?
  /// The public handle.
  let connection: WebSocketConnection

  init(
    id: UInt64, wsi: OpaquePointer, isTLS: Bool, maxMessageBytes: Int, maxQueuedBytes: Int,
    connection: WebSocketConnection
  ) {
    self.id = id
    self.wsi = wsi
    self.isTLS = isTLS
    self.maxQueuedBytes = maxQueuedBytes
    self.connection = connection
    parser = WebSocketFrameParser(maxMessageBytes: maxMessageBytes)
  }

  var isOpen: Bool { out.closing.isOpen }

  // MARK: - Receiving

  /// Reads what arrived; false when the connection must close now. Messages go to `deliver`
  /// while the socket is open; after this side's close everything but the peer's close frame
  /// is discarded.
  func receive(
    _ input: UnsafeRawBufferPointer, on loop: ServiceLoop, deliver: ([UInt8], Bool) -> Void
  ) -> Bool {
    lastActivityTick = loop.tick
    var index = 0
    var room = loop.takeReceiveRoom()
    defer { loop.returnReceiveRoom(room) }
    while let event = parser.next(input, &index, room: &room) {
      switch event {
      case .message(let bytes, let isText):
        if out.closing.isOpen { deliver(bytes, isText) }
      case .ping(let payload):
        guard out.closing.isOpen else { continue }
        if canWriteNow {
          guard writeFrame(WebSocketFrame.pong, payload, on: loop) else { return false }
        } else {
          out.pongOwed = payload
          lws_callback_on_writable(wsi)
        }
      case .pong:
        break
      case .close(let code, _):
        peerCloseCode = code
        if out.closing.peerClosed(code: code) { dropQueued() }
        armTimeout(PENDING_TIMEOUT_CLOSE_SEND, WebSocketClosing.flushSeconds)
      case .failure(let code, let reason):
        // Garbage after our own close: nothing more to say.
        guard out.closing.isOpen else { return false }
        requestClose(code: code, reason: reason, dropQueued: true)
      }
    }
    return pump(on: loop)
  }

  // MARK: - Sending

  /// Writes at once when nothing is queued and lws holds no unsent bytes for this socket;
  /// otherwise queues for the writable callback. Held frames go first, in the same write.
  func enqueue(_ bytes: [UInt8], binary: Bool, on loop: ServiceLoop) {
    switch out.route {
    case .closed:
      return
    case .direct:
      // The usual case, decided by one read of the socket's state.
      guard lws_partial_buffered(wsi) == 0 else { return dispatch(.message(bytes, binary: binary), on: loop) }
      if !writeFrame(binary ? WebSocketFrame.binary : WebSocketFrame.text, bytes, on: loop) { dropIdle() }
      return
    case .general:
      break
    }
    if out.held.isEmpty { return dispatch(.message(bytes, binary: binary), on: loop) }
    let messages = out.held
    out.held = HeldMessages()
    if canWriteNow {
      // The usual way a held message leaves: framed with this one straight into the loop's
      // send buffer, one write, no array built for the two.
      let count = messages.framedBytes + WebSocketFrame.maxHeaderLength + bytes.count
      let written = loop.writeFrames(wsi, upTo: count) { target in
        let end = messages.frame(into: target)
        return end + HeldMessages.frame(bytes, binary: binary, into: target + end)
      }
      noteWritten()
      if !written { dropIdle() }
      return
    }
    var frames = messages.framed(reserving: bytes.count + WebSocketFrame.maxHeaderLength)
    WebSocketFrame.append(bytes, binary: binary, to: &frames)
    dispatch(.frames(frames), on: loop)
  }

  /// Holds a message back so that it shares a write with the next one. Returns true when the
  /// holding starts, i.e. the loop must note a release deadline for this socket.
  func enqueueCoalesced(_ bytes: [UInt8], binary: Bool, on loop: ServiceLoop) -> Bool {
    let limit = maxQueuedBytes
    switch changeOut({ $0.hold(bytes, binary: binary, maxQueuedBytes: limit) }) {
    case .closed: return false
    case .overflows:
      overflow(on: loop)
      return false
    case .starts: return true
    case .joins: return false
    }
  }

  /// Whether the frames held since holding number `holding` began are still here (not left with
  /// a later message, flushed, or handed to the close).
  func isHolding(_ holding: UInt32) -> Bool { out.holdings == holding && !out.held.isEmpty }

  /// The coalescing deadline passed with nothing else written: the held frames leave alone.
  func flushHeld(on loop: ServiceLoop) {
    guard !out.held.isEmpty else { return }
    let item = Outgoing.frames(out.held.framed())
    out.held = HeldMessages()
    dispatch(item, on: loop)
  }

  private func dispatch(_ item: Outgoing, on loop: ServiceLoop) {
    if canWriteNow {
      if !write(item, on: loop) { dropIdle() }
      return
    }
    let limit = maxQueuedBytes
    let queued = changeOut { $0.queue(item, maxQueuedBytes: limit) }
    if queued.overflows { return overflow(on: loop) }
    if queued.first { lws_callback_on_writable(wsi) }
  }

  private var canWriteNow: Bool {
    out.nothingWaiting && lws_partial_buffered(wsi) == 0
  }

  /// The reader is too slow for what is sent to it: what waits is dropped (a server session
  /// keeps its own copy for resume) and the socket closes. Its kernel buffer is full, so the
  /// close frame may never leave: `WebSocketClosing.flushSeconds` bounds that.
  private func overflow(on loop: ServiceLoop) {
    requestClose(
      code: WebSocketCloseCode.tooSlow, reason: "reading too slowly (over \(maxQueuedBytes) bytes queued)",
      dropQueued: true)
    _ = pump(on: loop)
  }

  /// Closes after what is queued (or, with `dropQueued`, instead of it). The caller pumps.
  func requestClose(code: UInt16, reason: String, dropQueued drop: Bool = false) {
    let reasonBytes = Array(reason.utf8)
    guard changeOut({ $0.close(code: code, reason: reasonBytes, dropQueued: drop) }) else { return }
    parser.discardData()
    armTimeout(PENDING_TIMEOUT_CLOSE_SEND, WebSocketClosing.flushSeconds)
    lws_callback_on_writable(wsi)
  }

  private func dropQueued() {
    changeOut { $0.dropAll() }
  }

  /// One-byte pings: any frame the peer sends counts as activity, the pong included.
  private static let pingPayload: [UInt8] = [0x6b]

  func requestPing(on loop: ServiceLoop) {
    guard !out.pingDue, out.closing.isOpen else { return }
    if canWriteNow {
      if !writeFrame(WebSocketFrame.ping, Self.pingPayload, on: loop) { dropIdle() }
      return
    }
    out.pingDue = true
    lws_callback_on_writable(wsi)
  }

  func dropIdle() {
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
  }

  /// The writable callback: as much as the socket takes, in order (an owed pong, a keepalive
  /// ping, queued messages), then the closing steps. Returns -1 when the socket must close.
  func writable(on loop: ServiceLoop) -> Int32 {
    if readingPaused, lws_partial_buffered(wsi) == 0 {
      readingPaused = false
      lws_rx_flow_control(wsi, 1)
    }
    return pump(on: loop) ? 0 : -1
  }

  /// Writes what waits while lws takes it without holding bytes back, then carries out what the
  /// closing handshake says. False when the connection must close now.
  func pump(on loop: ServiceLoop) -> Bool {
    // The usual case after a read or a write, nothing waiting on an open socket: what the loops
    // below conclude, read in one access (each access of a stored property here was a runtime
    // exclusivity check before `changeOut`, and reading each made seven a message).
    if out.isOpenAndIdle {
      if lws_partial_buffered(wsi) != 0 { lws_callback_on_writable(wsi) }
      return true
    }
    while lws_partial_buffered(wsi) == 0 {
      if let pong = out.pongOwed {
        out.pongOwed = nil
        guard writeFrame(WebSocketFrame.pong, pong, on: loop) else { return false }
      } else if out.pingDue {
        out.pingDue = false
        guard writeFrame(WebSocketFrame.ping, Self.pingPayload, on: loop) else { return false }
      } else if let item = changeOut({ $0.popQueued() }) {
        guard write(item, on: loop) else { return false }
        // An idle socket keeps no queue storage.
        if out.queue.isEmpty { out.queue = FIFOQueue() }
      } else {
        break
      }
    }
    while true {
      let flushed = lws_partial_buffered(wsi) == 0
      switch out.closing.step(queueEmpty: out.queue.isEmpty, flushed: flushed) {
      case .nothing:
        if !flushed || !out.queue.isEmpty || out.pingDue || out.pongOwed != nil { lws_callback_on_writable(wsi) }
        return true
      case .writeClose(let code, let reason):
        let payload = WebSocketFrame.closePayload(code: code, reason: reason)
        guard writeFrame(WebSocketFrame.close, payload, on: loop) else { return false }
      case .halfClose:
        // The peer has everything we sent; it reads our close and answers, or ends the stream.
        if !isTLS { shutdown(lws_get_socket_fd(wsi), Int32(SHUT_WR)) }
        armTimeout(PENDING_TIMEOUT_CLOSE_ACK, WebSocketClosing.lingerSeconds)
        return true
      case .closeNow:
        return false
      }
    }
  }

  private func write(_ item: Outgoing, on loop: ServiceLoop) -> Bool {
    switch item {
    case .message(let bytes, let binary):
      return writeFrame(binary ? WebSocketFrame.binary : WebSocketFrame.text, bytes, on: loop)
    case .frames(let frames):
      let written = frames.withUnsafeBytes { loop.writeRaw(wsi, $0) }
      noteWritten()
      return written
    }
  }

  private func writeFrame(_ opcode: UInt8, _ payload: [UInt8], on loop: ServiceLoop) -> Bool {
    let written = payload.withUnsafeBytes { loop.writeFrame(wsi, opcode: opcode, $0) }
    noteWritten()
    return written
  }

  /// While lws holds bytes the socket did not take, it reads nothing from a raw socket, yet the
  /// socket stays readable: libuv would report it again on every pass and the loop would spin.
  /// Reading pauses until the bytes have left (`writable`); the peer meets TCP's backpressure.
  private func noteWritten() {
    // lws asked first: in the usual case (all taken) `readingPaused` is then not read at all.
    guard lws_partial_buffered(wsi) != 0, !readingPaused else { return }
    readingPaused = true
    lws_rx_flow_control(wsi, 0)
  }

  private func armTimeout(_ reason: pending_timeout, _ seconds: Int32) {
    lws_set_timeout(wsi, reason, seconds)
  }
}
