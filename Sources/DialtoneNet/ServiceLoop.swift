import CLibWebSockets
import DialtoneSupport
import Foundation
import Synchronization

/// Owns one libwebsockets context and the only thread that may call into it; what it serves is
/// its `role` (`ServerRole` or `ClientRole`).
///
/// Other threads talk to it through `post`, which queues a command and wakes the loop with
/// `lws_cancel_service`; the loop drains the queue in `LWS_CALLBACK_EVENT_WAIT_CANCELLED`.
final class ServiceLoop: @unchecked Sendable {
  // @unchecked: all but `inbox` and `contextForWakeups` (see there) is touched only on the service thread.

  enum Command: Sendable {
    case send(UInt64, [UInt8], binary: Bool)
    /// A text message that may wait up to `coalescingDelay` to share a write (server sockets).
    case sendCoalesced(UInt64, [UInt8])
    case close(UInt64, UInt16, String)
    case respond(UInt64, HTTPResponse)
    case connect(ClientConnectRequest)
    case shutdown(drainSeconds: Double)
    case sweep
    /// The next slice of the pings traffic did not carry out (`KeepaliveBacklog`).
    case keepalivePings
    /// A `NetworkExecutor`'s job or action.
    case work(ExecutorWork)
    case adopt([Int32])
  }

  // Cross-thread inbox.
  private struct Inbox: Sendable {
    var commands: [Command] = []
    var closed = false
  }
  private let inbox = Locked(Inbox())

  // Service-thread state.
  private(set) var context: OpaquePointer?
  /// The context as other threads may use it (only inside `inbox.withLock`, only to wake the loop).
  /// Set once, in init; not part of `Inbox` because `Locked` holds no C pointers.
  private var contextForWakeups: OpaquePointer?
  let role: any ServiceRole
  /// `role` when it is a server's: sends to its sockets skip the look-up by id (`send(_:coalesced:on:)`).
  private let serverRole: ServerRole?
  let maxMessageBytes: Int
  private let pingIntervalTicks: UInt32
  private let idleTimeoutTicks: UInt32
  /// Coarse time for keepalive: one tick per sweep, so receiving a message costs no clock read.
  private(set) var tick: UInt32 = 0
  private var sweepTimer: DispatchSourceTimer?
  private let sweepSeconds: Double
  private var pingsOwed = KeepaliveBacklog()
  private let pingPhases: UInt32
  /// Whole messages received since the last sweep: how much traffic the next interval will
  /// probably bring to carry the sweep's pings.
  private var messagesSinceSweep = 0
  var nextConnectionID: UInt64 = 1
  private(set) var draining = false
  private var drainDeadline: Date = .distantFuture
  private var stopRequested = false
  /// Opened before the context, given back just before it is destroyed, for what other threads
  /// open between lws's two closes of the context's event pipe (`DescriptorReserve`).
  private var cushion = DescriptorReserve(count: 8)
  private var wakeTimer: DispatchSourceTimer?
  private var sendBuffer: [UInt8]
  /// Timers whose actions run on this loop's thread (`schedule(after:_:)`).
  let timers = LoopTimers()
  /// The array a server socket's whole message is delivered in (`WebSocketFrameParser.next`),
  /// shared by the loop's sockets: reused for the next one once the receiver let it go, so a
  /// received message costs no allocation of its own, and an idle socket holds no buffer.
  private var receiveRoom: [UInt8] = []
  /// The room kept between reads is at most this big (a message bigger than one read never
  /// comes through it, so this bounds only what an odd read left).
  private static let receiveRoomLimit = 16 * 1024

  /// The room, moved out for one read (the loop keeps none meanwhile): a socket parses into a
  /// local array rather than into this class's stored property passed `inout` across the
  /// parser's call, which cost two tracked runtime exclusivity checks (and their TLS look-ups)
  /// per event read. Moved, not copied, so its storage stays uniquely referenced and is reused.
  func takeReceiveRoom() -> [UInt8] {
    var room: [UInt8] = []
    swap(&room, &receiveRoom)
    return room
  }

  /// Hands the room back after a read; one grown past `receiveRoomLimit` is let go.
  func returnReceiveRoom(_ room: consuming [UInt8]) {
    if room.capacity <= Self.receiveRoomLimit { receiveRoom = room }
  }
  let preamble = Int(dt_lws_pre())

  private var protocols: UnsafeMutablePointer<lws_protocols>?
  private let protocolName = strdup("dialtone")
  private var retryPolicy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
  private let stopper = UnsafeMutablePointer<dt_stopper>.allocate(capacity: 1)
  init(
    role: any ServiceRole, maxMessageBytes: Int, pingIntervalSeconds: Int, idleTimeoutSeconds: Int,
    sweepSeconds: Double = 5, lwsTimeoutSeconds: UInt32 = 20
  ) throws {
    self.sweepSeconds = sweepSeconds
    self.role = role
    serverRole = role as? ServerRole
    self.maxMessageBytes = maxMessageBytes
    pingIntervalTicks = UInt32(max(1, (Double(pingIntervalSeconds) / sweepSeconds).rounded()))
    idleTimeoutTicks = UInt32(max(2, (Double(idleTimeoutSeconds) / sweepSeconds).rounded()))
    pingPhases = KeepaliveBacklog.phases(pingIntervalTicks: pingIntervalTicks, idleTimeoutTicks: idleTimeoutTicks)
    self.sendBuffer = [UInt8](repeating: 0, count: Int(dt_lws_pre()) + 16 * 1024)
    lws_set_log_level(ProcessInfo.processInfo.environment["NET_DEBUG"] != nil ? 0xff : Int32(LLL_ERR), nil)

    // lws's own validity pings are off (0): its per-connection timers live in a sorted linked
    // list, and rescheduling one on every pong cost 16% of a core at 15k idle sockets.
    // Keepalive is `sweepIdleSockets` instead: one pass every few seconds.
    retryPolicy.initialize(to: lws_retry_bo_t())

    let protos = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
    protos.initialize(repeating: lws_protocols(), count: 2)  // [1] is the terminator
    protos[0].name = UnsafePointer(protocolName)
    protos[0].callback = serviceLoopCallback
    protos[0].per_session_data_size = 0
    // lws gives every WebSocket a receive buffer of this size at its first frame; the default
    // (4 KiB) dominated per-connection memory. Larger messages arrive in pieces and are reassembled.
    protos[0].rx_buffer_size = 1024
    // Without this, lws caps every send() at rx_buffer_size: a 1.4 KB offer went out as two
    // sends with a writable round trip (and four epoll_ctl calls) in between. One message, or a
    // batch of coalesced frames, is one send() now.
    protos[0].tx_packet_size = 256 * 1024
    protocols = protos

    var info = lws_context_creation_info()
    info.protocols = UnsafePointer(protos)
    info.user = Unmanaged.passUnretained(self).toOpaque()
    info.options =
      UInt64(LWS_SERVER_OPTION_LIBUV) | UInt64(LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN)
      | UInt64(LWS_SERVER_OPTION_DISABLE_IPV6)
      // Text messages and close reasons must be UTF-8 (RFC 6455 §8.1, §5.5.1): lws checks each
      // piece as it arrives and fails the connection with 1007 at the first invalid byte, before
      // the message is delivered (also for a message split over frames, or cut mid-character).
      | UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
    info.retry_and_idle_policy = UnsafePointer(retryPolicy)
    // lws's own bound on each pending step (connect, handshake, close); tests that must tell
    // it apart from an end of Dialtone's making set it longer than they run.
    info.timeout_secs = lwsTimeoutSeconds
    // With libuv, lws owns SIGINT/SIGTERM; without signal_cb a SIGTERM leaves the loop spinning.
    info.signal_cb = { _, signum in ProcessSignals.deliver(signum) }

    role.configure(&info)

    guard let ctx = lws_create_context(&info) else {
      throw NetError.listenFailed("cannot create the network context")
    }
    context = ctx
    contextForWakeups = ctx
  }

  deinit {
    cushion.release()
    protocols?.deallocate()
    retryPolicy.deallocate()
    stopper.deallocate()
    free(protocolName)
  }

  /// Set by the owner before `start`: jobs of this executor then run on the network thread.
  var executor: NetworkExecutor?
  private var serviceThread: pthread_t?
  /// Set once by `start` on the owner's thread, before any thread that waits for the loop exists.
  private var serviceWorker: WorkerThread?

  func start(name: String) {
    executor?.attach(self)
    let sweep = DispatchSource.makeTimerSource()
    sweep.schedule(deadline: .now() + sweepSeconds, repeating: sweepSeconds)
    sweep.setEventHandler { [weak self] in self?.post(.sweep) }
    sweep.resume()
    sweepTimer = sweep
    role.started(on: self)
    serviceWorker = WorkerThread(name: name, stackSize: 1 << 20) { [self] in
      guard let ctx = context else { return }
      serviceThread = pthread_self()
      timers.loopStarted()
      executor?.networkThreadStarted()
      while !stopRequested {
        if lws_service(ctx, 0) < 0 { break }
      }
      let leftover = closeInbox()
      wakeTimer?.cancel()
      sweepTimer?.cancel()
      role.stopped()
      // A loop that ended without a drain (lws_service failed) destroys its context here.
      cushion.release()
      lws_context_destroy(ctx)
      role.contextDestroyed()
      executor?.networkThreadStopped(leftover: leftover)
      context = nil
      // Last: once handed over, a due timer's action may run on another thread at once, and
      // nothing of this loop runs any more by then.
      timers.handOver(to: SystemClock())
    }
  }

  /// Blocks the calling thread until the loop has stopped and the context is destroyed.
  func waitUntilStopped() {
    serviceWorker?.wait()
  }

  /// Callable from any thread. On the network thread itself, sends and closes take effect at
  /// once (no wake-up round trip). Returns false when the loop has stopped.
  @discardableResult
  func post(_ command: Command) -> Bool {
    if isServiceThread, context != nil, !stopRequested {
      switch command {
      case .send, .sendCoalesced, .close:
        execute(command)
        return true
      default:
        break
      }
    }
    // The wake-up happens under the lock: the service thread closes the inbox under the same lock
    // before it destroys the context, so a late poster can never touch a freed context.
    return inbox.withLock { inbox in
      guard !inbox.closed, let ctx = contextForWakeups else { return false }
      inbox.commands.append(command)
      if inbox.commands.count == 1 { lws_cancel_service(ctx) }
      return true
    }
  }

  /// A text message to a server socket: written (or held, `coalesced`) at once when this is the
  /// network thread and the socket is open, as `post` would, without looking its id up.
  func send(_ bytes: [UInt8], coalesced: Bool, on connection: WebSocketConnection) {
    // The thread first: `connection.socket` is the network thread's to read.
    if let server = serverRole, isServiceThread, context != nil, !stopRequested, let socket = connection.socket {
      return server.send(to: socket, bytes, binary: false, coalesced: coalesced, on: self)
    }
    _ = post(coalesced ? .sendCoalesced(connection.id, bytes) : .send(connection.id, bytes, binary: false))
  }

  /// Runs `action` on this loop's thread after `delay`, from the loop's own timer; nil unless
  /// called on that thread while the loop runs (the caller then schedules it elsewhere).
  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> (any ScheduledAction)? {
    guard isServiceThread, let context, !stopRequested else { return nil }
    return timers.schedule(after: Self.nanoseconds(delay), in: context, action)
  }

  /// `delay` in whole nanoseconds: none for a negative one, `UInt64.max` past what fits.
  static func nanoseconds(_ delay: Duration) -> UInt64 {
    let (seconds, attoseconds) = delay.components
    guard seconds > 0 || (seconds == 0 && attoseconds > 0) else { return 0 }
    let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
    let (total, overflowAgain) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
    return overflow || overflowAgain ? .max : total
  }

  private var isServiceThread: Bool {
    guard let serviceThread else { return false }
    return pthread_equal(serviceThread, pthread_self()) != 0
  }

  private func wake() {
    inbox.withLock { inbox in
      guard !inbox.closed, let ctx = contextForWakeups else { return }
      lws_cancel_service(ctx)
    }
  }

  // MARK: - Service thread

  func drainInbox() {
    let batch: [Command] = inbox.withLock { inbox in
      let taken = inbox.commands
      inbox.commands.removeAll(keepingCapacity: true)
      return taken
    }
    for command in batch { execute(command) }
    if draining { checkDrainComplete() }
  }

  private func execute(_ command: Command) {
    switch command {
    case .send(let id, let bytes, let binary):
      role.send(id, bytes, binary: binary, coalesced: false, on: self)
    case .sendCoalesced(let id, let bytes):
      role.send(id, bytes, binary: false, coalesced: true, on: self)
    case .close(let id, let code, let reason):
      role.close(id, code: code, reason: reason, on: self)
    case .shutdown(let drainSeconds):
      beginDrain(seconds: drainSeconds)
    case .sweep:
      sweepIdleSockets()
    case .keepalivePings:
      drainOwedPings()
    case .work(let work):
      executor?.run(work)
    case .respond, .connect, .adopt:
      role.execute(command, on: self)
    }
  }

  /// Pings sockets that have been quiet for the ping interval and drops those quiet for the idle
  /// timeout (a peer that vanished without a FIN). Any frame, pong included, counts as activity.
  private func sweepIdleSockets() {
    tick &+= 1
    let leftover = !pingsOwed.isEmpty
    role.forEachSession { keepAlive($0) }
    pingsOwed.planDrain(expectedMessages: messagesSinceSweep)
    messagesSinceSweep = 0
    // Traffic did not carry out what the last sweep owed: the loop is quiet, so drain now.
    if leftover { drainOwedPings() }
  }

  private func keepAlive(_ session: any KeepaliveSocket) {
    let idle = tick &- session.lastActivityTick
    if idle >= idleTimeoutTicks {
      session.dropIdle()
    } else if KeepaliveBacklog.isDue(
      id: session.id, idle: idle, tick: tick, pingIntervalTicks: pingIntervalTicks, phases: pingPhases)
    {
      pingsOwed.owe(session.id)
    }
  }

  /// A role received a whole message: it carries out a ping or two of the sweep's backlog.
  func receivedMessage() {
    messagesSinceSweep &+= 1
    guard !pingsOwed.isEmpty else { return }
    ping(pingsOwed.piggyback())
  }

  /// Pings one slice of the backlog, then lets the loop serve everything else before the next.
  private func drainOwedPings() {
    ping(pingsOwed.nextSlice())
    if !pingsOwed.isEmpty { _ = post(.keepalivePings) }
  }

  /// Pings the sockets that are still open and still quiet.
  private func ping(_ ids: [UInt64]) {
    for id in ids {
      guard let session = role.session(id), tick &- session.lastActivityTick >= pingIntervalTicks else { continue }
      session.requestPing(on: self)
    }
  }

  private func beginDrain(seconds: Double) {
    guard !draining else { return }
    draining = true
    drainDeadline = Date().addingTimeInterval(seconds)
    role.beginDrain(on: self)
    // The loop sleeps until an event; this tick makes it re-check the deadline.
    let timer = DispatchSource.makeTimerSource()
    timer.schedule(deadline: .now() + 0.05, repeating: 0.05)
    timer.setEventHandler { [weak self] in self?.wake() }
    timer.resume()
    wakeTimer = timer
  }

  /// Closes the inbox; executor jobs and actions still in it are returned, in order, so they run
  /// elsewhere, not lost.
  private func closeInbox() -> [ExecutorWork] {
    inbox.withLock { inbox in
      inbox.closed = true
      let jobs = inbox.commands.compactMap {
        if case .work(let work) = $0 { return work }
        return nil
      }
      for case .adopt(let sockets) in inbox.commands { for socket in sockets { close(socket) } }
      inbox.commands.removeAll()
      return jobs
    }
  }

  private func checkDrainComplete() {
    guard !stopRequested, role.isIdle || Date() >= drainDeadline,
      let context
    else { return }
    stopRequested = true
    let leftover = closeInbox()
    for work in leftover { executor?.run(work) }
    wakeTimer?.cancel()
    // The stopper's destroy closes the event pipe twice: the cushion's numbers take what other
    // threads open in between.
    cushion.release()
    dt_lws_schedule_stop(context, stopper)
  }

  /// Copies `bytes` behind the LWS_PRE headroom lws requires and writes them in one call.
  func write(_ wsi: OpaquePointer, _ bytes: ArraySlice<UInt8>, _ mode: lws_write_protocol) -> Bool {
    let written: Int32 = withSendBuffer(count: preamble + bytes.count) { buffer in
      guard let base = buffer.baseAddress else { return -1 }
      bytes.withUnsafeBufferPointer { source in
        if let src = source.baseAddress { (base + preamble).update(from: src, count: bytes.count) }
      }
      return lws_write(wsi, base + preamble, bytes.count, mode)
    }
    return Int(written) >= bytes.count
  }

  /// Writes bytes as they are on a raw socket (the server's: its HTTP and WebSocket framing are
  /// done here). lws sends what the socket takes and keeps the rest (`lws_partial_buffered`);
  /// false only when the socket failed.
  func writeRaw(_ wsi: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return true }
    // lws only reads from the buffer (it copies what the socket does not take).
    let pointer = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
    return lws_write(wsi, pointer, bytes.count, LWS_WRITE_HTTP) >= 0  // LWS_WRITE_RAW: a macro for it
  }

  /// One unfragmented server frame (unmasked) carrying `payload`, framed in the loop's scratch
  /// buffer so that header and payload leave in one write.
  func writeFrame(_ wsi: OpaquePointer, opcode: UInt8, _ payload: UnsafeRawBufferPointer) -> Bool {
    writeFrames(wsi, upTo: WebSocketFrame.maxHeaderLength + payload.count) { base in
      let header = WebSocketFrame.writeHeader(opcode: opcode, count: payload.count, into: base)
      if let source = payload.baseAddress { (base + header).copyMemory(from: source, byteCount: payload.count) }
      return header + payload.count
    }
  }

  private static let scratchLimit = 256 * 1024

  /// Frames written by `fill` (at most `count` bytes; it returns how many) leave in one write:
  /// through the loop's scratch buffer, or, when they are big, a buffer of their own (the shared
  /// one keeps its usual size).
  func writeFrames(_ wsi: OpaquePointer, upTo count: Int, _ fill: (UnsafeMutableRawPointer) -> Int) -> Bool {
    if count > Self.scratchLimit {
      var frames = [UInt8](repeating: 0, count: count)
      return frames.withUnsafeMutableBytes { buffer -> Bool in
        guard let base = buffer.baseAddress else { return false }
        return writeRaw(wsi, UnsafeRawBufferPointer(start: base, count: fill(base)))
      }
    }
    return withSendBuffer(count: count) { buffer -> Bool in
      guard let base = buffer.baseAddress.map(UnsafeMutableRawPointer.init) else { return false }
      return writeRaw(wsi, UnsafeRawBufferPointer(start: base, count: fill(base)))
    }
  }

  /// Runs `body` on the scratch buffer, grown to at least `count` bytes, taken out of its stored
  /// property for the call and put back after. An access spanning `body` (an lws write, a
  /// caller's closure) is one the optimiser cannot prove exclusive, and it made every access to
  /// the buffer a runtime exclusivity check, about two per frame written; a call made inside
  /// `body` that writes too finds the property empty and uses a buffer of its own.
  private func withSendBuffer<Result>(
    count: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Result
  ) -> Result {
    var buffer: [UInt8] = []
    swap(&buffer, &sendBuffer)
    if buffer.count < count { buffer = [UInt8](repeating: 0, count: count) }
    defer { sendBuffer = buffer }
    return buffer.withUnsafeMutableBufferPointer { body($0) }
  }

  /// A connection id never used before on this loop.
  func allocateID() -> UInt64 {
    let id = nextConnectionID
    nextConnectionID += 1
    return id
  }

  /// A new id, carried by the wsi's user data (the client's sockets are looked up by it).
  func allocateID(for wsi: OpaquePointer) -> UInt64 {
    let id = allocateID()
    dt_lws_set_id(wsi, id)
    return id
  }

  func peerAddress(_ wsi: OpaquePointer) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    let count = buffer.count
    return buffer.withUnsafeMutableBufferPointer { b -> String in
      guard let base = b.baseAddress, lws_get_peer_simple(wsi, base, count) != nil else { return "" }
      return String(cString: base)
    }
  }

  fileprivate func handle(
    _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?, _ length: Int
  ) -> Int32 {
    switch reason {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
      drainInbox()
      return 0
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
      return draining ? 1 : 0
    case LWS_CALLBACK_RAW_RX_FILE where wsi == timers.descriptor:
      timers.expired()
      return 0
    case LWS_CALLBACK_RAW_CLOSE_FILE where wsi == timers.descriptor:
      timers.descriptorClosed(wsi)
      return 0
    default:
      return role.handle(wsi, reason, input, length, on: self)
        ?? lws_callback_http_dummy(wsi, reason, user, input, length)
    }
  }
}

/// The single C entry point: finds the owning loop through the context's user pointer.
private let serviceLoopCallback:
  @convention(c) (
    OpaquePointer?, lws_callback_reasons, UnsafeMutableRawPointer?,
    UnsafeMutableRawPointer?, Int
  ) -> Int32 = { wsi, reason, user, input, length in
    guard let wsi, let contextUser = lws_context_user(lws_get_context(wsi)) else {
      return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let loop = Unmanaged<ServiceLoop>.fromOpaque(contextUser).takeUnretainedValue()
    return loop.handle(wsi, reason, user, input, length)
  }

public enum NetError: Error, Sendable, CustomStringConvertible {
  case listenFailed(String)
  case invalidURL(String)
  case connectFailed(String)

  public var description: String {
    switch self {
    case .listenFailed(let m): return m
    case .invalidURL(let m): return "invalid URL: \(m)"
    case .connectFailed(let m): return "connect failed: \(m)"
    }
  }
}
