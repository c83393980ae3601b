import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The device's signaling connection: connects and authenticates, reconnects with jittered
/// backoff, resumes its session so no server message is lost across a dropped socket, re-sends
/// requests that were never answered (with their original ids, so the server applies them once),
/// acks what it processed, pings when idle, and reconnects at once on a network change.
public actor SignalingClient {
  public struct Configuration: Sendable {
    public var url: String
    /// Reconnect delays; the last repeats. Each gets ±50% jitter so devices do not stampede.
    public var backoff: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8)]
    /// A ping unanswered this long means the socket is dead.
    public var pingTimeout: Duration = .seconds(10)
    /// No `welcome` this long after opening the socket (a server that accepts and then says
    /// nothing, a connect that hangs): the socket is closed and the client reconnects.
    public var welcomeTimeout: Duration = .seconds(10)
    /// The protocol extensions announced in `hello` (the server answers with those it has too,
    /// in `welcome.features`): what this SDK implements.
    public var features: [String] = [ProtocolFeature.preconnect]

    public init(url: String) { self.url = url }
  }

  /// How long a transport may let a socket receive nothing before it gives up on it (URLSession's
  /// `timeoutIntervalForRequest`): twice the heartbeat. A quiet healthy socket receives the answer
  /// to a `ping` sent after half a heartbeat of silence, and the client itself closes a socket
  /// whose ping is unanswered after `pingTimeout`: a transport timeout below that would drop
  /// healthy sockets, and this one outlasts two pings and a lost answer.
  public static func transportIdleTimeout(heartbeatSeconds: Int = ProtocolDefaults.heartbeatSeconds) -> Duration {
    .seconds(2 * heartbeatSeconds)
  }

  public enum Event: Sendable {
    case connected(ServerMessage.Welcome)
    /// The socket dropped; the client is reconnecting.
    case disconnected
    /// A server message for the app (answers to requests go to their callers instead).
    case message(ServerMessage)
    /// The session could not be resumed: the app must re-fetch the state of its calls.
    case resynced
    /// The client stopped for good: token refused (4401), replaced by another connection of
    /// this device (4409), protocol error (4400), or `stop()`.
    case stopped(reason: String)
  }

  public nonisolated let events: AsyncStream<Event>
  /// The user this connection is signed in as, from the last `welcome` (nil before the first).
  /// Set before any answer on that connection is delivered.
  public private(set) var userId: String?
  /// The protocol extensions the server agreed to in the last `welcome` (empty before it).
  public private(set) var agreedFeatures: Set<String> = []
  private let eventSink: AsyncStream<Event>.Continuation
  private let configuration: Configuration
  private let transport: any SignalingTransport
  private let token: @Sendable () async throws -> String
  private let clock: any DialtoneClock

  private var running = false
  private var loop: Task<Void, Never>?
  private var socket: (any SignalingSocket)?
  private var welcomed = false
  private var wakeReconnect: CheckedContinuation<Void, Never>?
  private var waitGeneration = 0

  private var sessionId: String?
  private var lastSeq: UInt64 = 0
  private var unacked = 0
  private var ackScheduled = false
  private var heartbeat: Double = Double(ProtocolDefaults.heartbeatSeconds)
  private var lastSent: Date

  private struct Pending {
    let message: ClientMessage
    let reply: AsyncThrowingStream<ServerMessage, any Error>.Continuation
    /// Times the server answered `rate-limited` and the request was sent again.
    var retries = 0
  }
  /// A request refused as `rate-limited` is sent again (same id) after the server's
  /// `retryAfterMs`, this many times, before the refusal is handed to the caller.
  static let rateLimitRetries = 5
  private var pending: [String: Pending] = [:]
  private var order: [String] = []
  private let idPrefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
  private var nextID = 0
  /// `stop(draining:)` callers waiting for every pending request to be answered.
  private var drainWaiters: [CheckedContinuation<Void, Never>] = []

  public init(
    configuration: Configuration, transport: any SignalingTransport, clock: any DialtoneClock = SystemClock(),
    token: @escaping @Sendable () async throws -> String
  ) {
    self.clock = clock
    lastSent = clock.now
    self.configuration = configuration
    self.transport = transport
    self.token = token
    (events, eventSink) = AsyncStream<Event>.makeStream()
  }

  public func start() {
    guard !running else { return }
    running = true
    loop = Task { await self.connectLoop() }
  }

  public func stop() {
    guard running else { return }
    running = false
    socket?.close(code: CloseCode.normal.rawValue)
    wakeReconnect?.resume()
    wakeReconnect = nil
    failPending(SignalingClientError.stopped)
    eventSink.yield(.stopped(reason: "stopped"))
  }

  /// Stops once every request sent so far has been answered, or after `grace`. An app that
  /// quits right after hanging up needs this: `stop()` drops an unanswered `hangup` with the
  /// socket, and on a congested or lossy link the server then learns of it only when the other
  /// side's media times out.
  public func stop(draining grace: Duration) async {
    guard running, !pending.isEmpty, grace > .zero else { return stop() }
    let timer = Task { [clock] in
      try? await clock.sleep(for: grace)
      self.releaseDrainWaiters()
    }
    await withCheckedContinuation { drainWaiters.append($0) }
    timer.cancel()
    stop()
  }

  private func releaseDrainWaiters() {
    let waiters = drainWaiters
    drainWaiters.removeAll()
    for waiter in waiters { waiter.resume() }
  }

  /// The network changed (Wi-Fi → cellular): the old socket is probably dead; reconnect now.
  public func networkChanged() {
    socket?.close(code: CloseCode.goingAway.rawValue)
    wakeReconnect?.resume()
    wakeReconnect = nil
  }

  /// Sends a request and returns the server's answer (`ack` or `error`). It survives reconnects:
  /// an unanswered request is re-sent with the same id after the session resumes.
  public func request(_ message: ClientMessage) async throws -> ServerMessage {
    try await submit(message).value
  }

  /// Queues a request (sent in call order) and returns at once; the answer is awaited on the
  /// returned `SignalingReply`, or not at all. Pipelining matters on slow links: a trickled
  /// candidate must not wait a round trip for the ack of the one before it.
  public func submit(_ message: ClientMessage) throws -> SignalingReply {
    guard running else { throw SignalingClientError.stopped }
    nextID += 1
    let id = "\(idPrefix)-\(nextID)"
    let (stream, continuation) = AsyncThrowingStream<ServerMessage, any Error>.makeStream(
      bufferingPolicy: .bufferingNewest(1))
    pending[id] = Pending(message: message, reply: continuation)
    order.append(id)
    if welcomed { transmit(MessageCodec.encodeString(message, id: id)) }
    return SignalingReply(stream: stream)
  }

  // MARK: - Connection loop

  private func connectLoop() async {
    var attempt = 0
    while running {
      let bearer: String
      do { bearer = try await token() } catch {
        eventSink.yield(.stopped(reason: "no token: \(error)"))
        running = false
        failPending(SignalingClientError.stopped)
        return
      }
      let socket = transport.open(url: configuration.url, bearerToken: nil)
      self.socket = socket
      welcomed = false
      let hello = ClientMessage.hello(
        .init(
          token: bearer, resume: sessionId.map { .init(sessionId: $0, lastSeq: lastSeq) },
          features: configuration.features))
      socket.send(MessageCodec.encodeString(hello, id: "\(idPrefix)-hello"))
      let keepalive = Task { await self.keepAlive(socket) }
      let handshake = Task { [clock, configuration] in
        do { try await clock.sleep(for: configuration.welcomeTimeout) } catch { return }
        self.closeUnlessWelcomed(socket)
      }
      var closeCode: Int?
      for await event in socket.events {
        switch event {
        case .opened: continue
        case .text(let text): received(text)
        case .closed(let code): closeCode = code
        }
      }
      keepalive.cancel()
      handshake.cancel()
      self.socket = nil
      let wasWelcomed = welcomed
      welcomed = false
      guard running else { return }
      if let code = closeCode, let close = CloseCode(rawValue: code), !close.shouldReconnect, close != .normal {
        running = false
        failPending(SignalingClientError.stopped)
        eventSink.yield(.stopped(reason: "closed by the server with \(code)"))
        return
      }
      eventSink.yield(.disconnected)
      attempt = wasWelcomed ? 0 : attempt + 1
      let base =
        configuration.backoff.isEmpty
        ? .seconds(1) : configuration.backoff[min(attempt, configuration.backoff.count - 1)]
      let delay = wasWelcomed ? .zero : base * Double.random(in: 0.5...1.5)
      await waitBeforeReconnect(delay)
    }
  }

  private func closeUnlessWelcomed(_ opened: any SignalingSocket) {
    // Still the same connection attempt (the loop clears `socket` when it ends)?
    guard !welcomed, socket != nil else { return }
    opened.close(code: CloseCode.goingAway.rawValue)
  }

  private func waitBeforeReconnect(_ delay: Duration) async {
    guard delay > .zero else { return }
    waitGeneration += 1
    let generation = waitGeneration
    await withCheckedContinuation { continuation in
      wakeReconnect = continuation
      Task { [clock] in
        try? await clock.sleep(for: delay)
        self.wake(generation)
      }
    }
  }

  private func wake(_ generation: Int) {
    // Only the wait still pending may be resumed (a network change may have resumed it already).
    guard generation == waitGeneration, let current = wakeReconnect else { return }
    wakeReconnect = nil
    current.resume()
  }

  private func keepAlive(_ socket: any SignalingSocket) async {
    while !Task.isCancelled {
      try? await clock.sleep(for: .seconds(heartbeat / 2))
      guard !Task.isCancelled, welcomed, clock.now.timeIntervalSince(lastSent) >= heartbeat / 2 else { continue }
      let probe = Task { try await self.request(.ping(.init())) }
      let timeout = Task { [clock, configuration] in
        try await clock.sleep(for: configuration.pingTimeout)
        socket.close(code: CloseCode.goingAway.rawValue)  // no answer: the socket is dead
      }
      _ = try? await probe.value
      timeout.cancel()
    }
  }

  // MARK: - Incoming

  private func received(_ text: String) {
    guard let envelope = try? MessageCodec.decodeServerMessage(text) else { return }
    if case .welcome(let welcome) = envelope.message {
      welcomed = true
      userId = welcome.userId
      agreedFeatures = Set(welcome.features)
      heartbeat = Double(welcome.heartbeatSeconds)
      if !welcome.resumed {
        lastSeq = 0
        unacked = 0
      }
      let resynced = sessionId != nil && !welcome.resumed
      sessionId = welcome.sessionId
      eventSink.yield(.connected(welcome))
      if resynced { eventSink.yield(.resynced) }
      // Requests never answered go again, with their original ids.
      for id in order {
        if let request = pending[id] { transmit(MessageCodec.encodeString(request.message, id: id)) }
      }
      return
    }
    guard let seq = envelope.seq else {
      if let replyTo = envelope.message.replyTo { answer(replyTo, envelope.message) }
      return
    }
    guard seq > lastSeq else {
      scheduleAck()  // a replayed duplicate: acknowledge, do not process twice
      return
    }
    lastSeq = seq
    unacked += 1
    if unacked >= ProtocolDefaults.ackEveryMessages { sendAck() } else { scheduleAck() }
    if let replyTo = envelope.message.replyTo, pending[replyTo] != nil {
      answer(replyTo, envelope.message)
    } else if envelope.message.replyTo == nil {
      eventSink.yield(.message(envelope.message))
    }
  }

  private func answer(_ id: String, _ message: ServerMessage) {
    if case .error(let error) = message, error.code == .rateLimited, let request = pending[id],
      request.retries < Self.rateLimitRetries
    {
      pending[id]?.retries += 1
      let wait = Duration.milliseconds(max(50, min(error.retryAfterMs ?? 1000, 60_000)))
      Task { [clock] in
        try? await clock.sleep(for: wait)
        self.retransmit(id)
      }
      return
    }
    guard let request = pending.removeValue(forKey: id) else { return }
    order.removeAll { $0 == id }
    request.reply.yield(message)
    request.reply.finish()
    if pending.isEmpty { releaseDrainWaiters() }
  }

  private func scheduleAck() {
    guard !ackScheduled else { return }
    ackScheduled = true
    Task {
      try? await clock.sleep(for: .seconds(ProtocolDefaults.ackIntervalSeconds))
      self.sendAck()
    }
  }

  private func sendAck() {
    ackScheduled = false
    unacked = 0
    guard welcomed else { return }
    transmit(MessageCodec.encodeString(.ack(.init(seq: lastSeq)), id: nil))
  }

  private func transmit(_ text: String) {
    lastSent = clock.now
    socket?.send(text)
  }

  /// After a rate-limit wait; a reconnect meanwhile has re-sent it already (or will).
  private func retransmit(_ id: String) {
    guard welcomed, let request = pending[id] else { return }
    transmit(MessageCodec.encodeString(request.message, id: id))
  }

  private func failPending(_ error: any Error) {
    for id in order { pending[id]?.reply.finish(throwing: error) }
    pending.removeAll()
    order.removeAll()
    releaseDrainWaiters()
  }
}

public enum SignalingClientError: Error, Sendable {
  case stopped
}

/// The server's answer to one submitted request (`ack` or `error`), awaited at most once.
public struct SignalingReply: Sendable {
  let stream: AsyncThrowingStream<ServerMessage, any Error>

  public var value: ServerMessage {
    get async throws {
      for try await message in stream { return message }
      throw SignalingClientError.stopped
    }
  }
}
