import DialtoneProtocol
import Foundation

/// The signaling connection's rules as a pure value: `handle(_:now:)` takes an event (an app
/// action, a socket's frame or close, a token, a timer) and returns the effects to run, in
/// order. `SignalingClient` runs them (sockets, the token, timers, the answers its callers
/// await) and feeds their results back.
///
/// It connects and authenticates, reconnects with jittered backoff (the jitter comes in with
/// the close, so tests choose it), resumes its session so no server message is lost across a
/// dropped socket, re-sends requests that were never answered (with their original ids, so the
/// server applies them once), acks what it processed, pings when idle, reconnects at once
/// on a network change, and while the app waits to stop replaces a socket that answers nothing.
public struct SignalingMachine: Sendable {
  public enum Event: Sendable, Equatable {
    case start
    case stop
    /// The app stops once what is pending is answered (`SignalingClient.stop(draining:)`): from
    /// now on a welcomed socket that answers none of it for `configuration.drainStall` is given
    /// up for a fresh one.
    case drain
    case networkChanged
    case tokenFetched(String)
    case tokenFailed(String)
    /// A text frame of socket `socket`.
    case received(socket: Int, String)
    /// Socket `socket` is gone (the server's close code, if any); `jitter` (0.5...1.5) scales
    /// the backoff before the next attempt.
    case closed(socket: Int, code: Int?, jitter: Double)
    case timerFired(Timer)
  }

  public enum Effect: Sendable, Equatable {
    /// Get a bearer token: `.tokenFetched` or `.tokenFailed` follows.
    case fetchToken
    /// Open socket `socket` and send `hello` on it first; its frames and its end come back.
    case open(socket: Int, hello: String)
    case send(socket: Int, String)
    case close(socket: Int, code: Int)
    /// For the app (`SignalingClient.events`).
    case deliver(SignalingClient.Event)
    /// The answer to the request `id` (an `ack` or `error`).
    case reply(id: String, ServerMessage)
    /// Every request still pending fails: the client stopped.
    case failAll
    /// Every request sent so far has been answered.
    case drained
    case arm(Timer, after: Duration)
    case cancel(Timer)
  }

  public enum Timer: Hashable, Sendable {
    /// No `welcome` on this socket by now: it is closed.
    case welcome(socket: Int)
    /// Half a heartbeat: ping if nothing was sent meanwhile.
    case keepalive(socket: Int)
    /// The ping is unanswered: the socket is dead.
    case ping(socket: Int)
    /// The next connection attempt.
    case reconnect
    /// Acknowledge what arrived since the last ack.
    case ack
    /// A request refused as `rate-limited` goes again.
    case retry(id: String)
    /// Draining: this socket answered none of the pending requests for `drainStall`.
    case drainStall(socket: Int)
  }

  /// Where the connection is.
  enum Link: Sendable, Equatable {
    /// Not started, or stopped for good.
    case stopped
    /// Getting the token for the next socket; `attempt` counts the sockets that failed since
    /// the last welcome.
    case fetchingToken(attempt: Int)
    /// The socket is open (or opening) and its hello sent; the welcome is awaited.
    case greeting(socket: Int, attempt: Int)
    /// Welcomed: requests go out at once. `ping`: the keepalive's ping awaiting its answer.
    case welcomed(socket: Int, ping: String?)
    /// Waiting before the next attempt.
    case waiting(attempt: Int)
  }

  /// What is owed the server of the messages that arrived.
  enum Acks: Sendable, Equatable {
    case upToDate
    /// `count` messages since the last ack; the ack timer runs.
    case owed(count: Int)
  }

  struct Pending: Sendable, Equatable {
    let message: ClientMessage
    /// Times the server answered `rate-limited` and it was sent again.
    var retries = 0
  }

  /// A request refused as `rate-limited` is sent again (same id) after the server's
  /// `retryAfterMs`, this many times, before the refusal is handed to the caller.
  static let rateLimitRetries = 5

  let configuration: SignalingClient.Configuration
  private let idPrefix: String
  var link = Link.stopped

  // The session: it outlives sockets.
  /// The user this connection is signed in as, from the last `welcome` (nil before the first).
  public private(set) var userId: String?
  /// The protocol extensions the server agreed to in the last `welcome` (empty before it).
  public private(set) var agreedFeatures: Set<String> = []
  private var sessionId: String?
  private var lastSeq: UInt64 = 0
  private var acks = Acks.upToDate
  private var heartbeat = Double(ProtocolDefaults.heartbeatSeconds)
  /// When something was last sent (the keepalive pings only an idle socket).
  private var lastSent: Date

  // Requests not answered yet, in the order they were made.
  private var pending: [String: Pending] = [:]
  private var order: [String] = []
  private var nextID = 0
  private var sockets = 0
  /// The app waits for the pending requests' answers before it stops.
  private var draining = false
  /// The socket whose `drainStall` timer runs.
  private var stallWatched: Int?

  /// - Parameter idPrefix: makes this client's request ids its own (a random word).
  public init(configuration: SignalingClient.Configuration, idPrefix: String, now: Date) {
    self.configuration = configuration
    self.idPrefix = idPrefix
    lastSent = now
  }

  public var isRunning: Bool { link != .stopped }
  /// Some request has not been answered yet.
  public var hasPending: Bool { !pending.isEmpty }

  private var welcomedSocket: Int? {
    if case .welcomed(let socket, _) = link { return socket }
    return nil
  }

  private var openSocket: Int? {
    switch link {
    case .greeting(let socket, _), .welcomed(let socket, _): socket
    case .stopped, .fetchingToken, .waiting: nil
    }
  }

  // MARK: Requests

  /// Queues a request (sent at once when welcomed, else after the next welcome) and returns
  /// its id; nil once stopped.
  public mutating func submit(_ message: ClientMessage, now: Date) -> (id: String, effects: [Effect])? {
    guard isRunning else { return nil }
    nextID += 1
    let id = "\(idPrefix)-\(nextID)"
    pending[id] = Pending(message: message)
    order.append(id)
    guard let socket = welcomedSocket else { return (id, []) }
    return (id, [transmit(MessageCodec.encodeString(message, id: id), on: socket, now: now)])
  }

  // MARK: Transitions

  public mutating func handle(_ event: Event, now: Date) -> [Effect] {
    switch event {
    case .start:
      guard link == .stopped else { return [] }
      link = .fetchingToken(attempt: 0)
      return [.fetchToken]
    case .stop:
      guard isRunning else { return [] }
      var effects: [Effect] = openSocket.map { [.close(socket: $0, code: CloseCode.normal.rawValue)] } ?? []
      if case .waiting = link { effects.append(.cancel(.reconnect)) }
      return effects + stop(reason: "stopped")
    case .drain:
      guard isRunning, !draining else { return [] }
      draining = true
      guard hasPending, let socket = welcomedSocket else { return [] }  // a welcome arms it
      return watchStall(on: socket)
    case .networkChanged:
      // The old socket is probably dead: its close starts the next attempt at once.
      switch link {
      case .greeting(let socket, _), .welcomed(let socket, _):
        return [.close(socket: socket, code: CloseCode.goingAway.rawValue)]
      case .waiting(let attempt):
        link = .fetchingToken(attempt: attempt)
        return [.cancel(.reconnect), .fetchToken]
      case .stopped, .fetchingToken:
        return []
      }
    case .tokenFetched(let bearer):
      guard case .fetchingToken(let attempt) = link else { return [] }
      sockets += 1
      link = .greeting(socket: sockets, attempt: attempt)
      let hello = ClientMessage.hello(
        .init(
          token: bearer, resume: sessionId.map { .init(sessionId: $0, lastSeq: lastSeq) },
          features: configuration.features))
      return [
        .open(socket: sockets, hello: MessageCodec.encodeString(hello, id: "\(idPrefix)-hello")),
        .arm(.welcome(socket: sockets), after: configuration.welcomeTimeout),
        .arm(.keepalive(socket: sockets), after: .seconds(heartbeat / 2)),
      ]
    case .tokenFailed(let why):
      guard case .fetchingToken = link else { return [] }
      return stop(reason: "no token: \(why)")
    case .received(let socket, let text):
      guard socket == openSocket else { return [] }
      return received(text, on: socket, now: now)
    case .closed(let socket, let code, let jitter):
      guard socket == openSocket else { return [] }
      return closed(socket, code: code, jitter: jitter)
    case .timerFired(let timer):
      return timerFired(timer, now: now)
    }
  }

  private mutating func stop(reason: String) -> [Effect] {
    var effects = unwatchStall()
    draining = false
    if case .owed = acks { effects.append(.cancel(.ack)) }
    acks = .upToDate
    for id in order where pending[id]?.retries ?? 0 > 0 { effects.append(.cancel(.retry(id: id))) }
    link = .stopped
    pending = [:]
    order = []
    return effects + [.deliver(.stopped(reason: reason)), .failAll]
  }

  // MARK: Incoming

  private mutating func received(_ text: String, on socket: Int, now: Date) -> [Effect] {
    guard let envelope = try? MessageCodec.decodeServerMessage(text) else { return [] }
    if case .welcome(let welcome) = envelope.message { return welcomed(welcome, on: socket, now: now) }
    guard let seq = envelope.seq else {
      return envelope.message.replyTo.map { answer($0, envelope.message) } ?? []
    }
    // A replayed duplicate: acknowledge, do not process twice.
    guard seq > lastSeq else { return scheduleAck() }
    lastSeq = seq
    let count: Int
    if case .owed(let owed) = acks { count = owed + 1 } else { count = 1 }
    var effects =
      count >= ProtocolDefaults.ackEveryMessages ? sendAck(now: now) : scheduleAck(count: count)
    if let replyTo = envelope.message.replyTo {
      effects += answer(replyTo, envelope.message)
    } else {
      effects.append(.deliver(.message(envelope.message)))
    }
    return effects
  }

  private mutating func welcomed(_ welcome: ServerMessage.Welcome, on socket: Int, now: Date) -> [Effect] {
    link = .welcomed(socket: socket, ping: nil)
    userId = welcome.userId
    agreedFeatures = Set(welcome.features)
    heartbeat = Double(welcome.heartbeatSeconds)
    var effects: [Effect] = [.cancel(.welcome(socket: socket))]
    if !welcome.resumed {
      lastSeq = 0
      if case .owed = acks { effects.append(.cancel(.ack)) }
      acks = .upToDate
    }
    let resynced = sessionId != nil && !welcome.resumed
    sessionId = welcome.sessionId
    effects.append(.deliver(.connected(welcome)))
    if resynced { effects.append(.deliver(.resynced)) }
    // Requests never answered go again, with their original ids.
    for id in order {
      if let request = pending[id] {
        effects.append(transmit(MessageCodec.encodeString(request.message, id: id), on: socket, now: now))
      }
    }
    if draining, hasPending { effects += watchStall(on: socket) }
    return effects
  }

  private mutating func answer(_ id: String, _ message: ServerMessage) -> [Effect] {
    if case .welcomed(let socket, id?) = link {
      // The keepalive's ping: the socket is alive.
      link = .welcomed(socket: socket, ping: nil)
      return [.cancel(.ping(socket: socket)), .arm(.keepalive(socket: socket), after: .seconds(heartbeat / 2))]
    }
    if case .error(let error) = message, error.code == .rateLimited, let request = pending[id],
      request.retries < Self.rateLimitRetries
    {
      pending[id]?.retries += 1
      let retry = Effect.arm(.retry(id: id), after: .milliseconds(max(50, min(error.retryAfterMs ?? 1000, 60_000))))
      // An answer, if not the one awaited: the socket is not stuck.
      if draining, let socket = welcomedSocket { return [retry] + watchStall(on: socket) }
      return [retry]
    }
    guard pending.removeValue(forKey: id) != nil else { return [] }
    order.removeAll { $0 == id }
    if pending.isEmpty { return [.reply(id: id, message)] + unwatchStall() + [.drained] }
    // An answer is progress: the socket gets a fresh window for the rest.
    if draining, let socket = welcomedSocket { return [.reply(id: id, message)] + watchStall(on: socket) }
    return [.reply(id: id, message)]
  }

  // MARK: Draining

  /// Watches `socket` for `drainStall` (again, if it was watched already).
  private mutating func watchStall(on socket: Int) -> [Effect] {
    stallWatched = socket
    return [.arm(.drainStall(socket: socket), after: configuration.drainStall)]
  }

  private mutating func unwatchStall() -> [Effect] {
    guard let socket = stallWatched else { return [] }
    stallWatched = nil
    return [.cancel(.drainStall(socket: socket))]
  }

  /// A welcomed socket answered none of the pending requests for `drainStall` while the app
  /// waits to stop. On a congested link TCP may hold whatever is written now behind a lost
  /// segment whose retransmission timer has doubled with each loss (seconds, then tens of
  /// seconds), so the hangup would leave after the app gave up; a fresh connection starts with
  /// short timers. The socket is given up at once rather than closed and awaited (its close
  /// frame would queue behind the same stuck bytes); the new one resumes the session and
  /// re-sends what is pending with the original ids, so nothing applies twice.
  private mutating func replaceStalledSocket(_ socket: Int) -> [Effect] {
    guard case .welcomed(socket, let ping) = link, hasPending else { return [] }
    var effects: [Effect] = [.cancel(.keepalive(socket: socket))]
    if ping != nil { effects.append(.cancel(.ping(socket: socket))) }
    link = .fetchingToken(attempt: 0)
    return effects + [.close(socket: socket, code: CloseCode.goingAway.rawValue), .deliver(.disconnected), .fetchToken]
  }

  // MARK: Acks

  private mutating func scheduleAck(count: Int? = nil) -> [Effect] {
    switch acks {
    case .upToDate:
      acks = .owed(count: count ?? 0)
      return [.arm(.ack, after: .seconds(ProtocolDefaults.ackIntervalSeconds))]
    case .owed(let owed):
      acks = .owed(count: count ?? owed)
      return []
    }
  }

  private mutating func sendAck(now: Date) -> [Effect] {
    var effects: [Effect] = []
    if case .owed = acks { effects.append(.cancel(.ack)) }
    acks = .upToDate
    guard let socket = welcomedSocket else { return effects }
    return effects + [transmit(MessageCodec.encodeString(.ack(.init(seq: lastSeq)), id: nil), on: socket, now: now)]
  }

  private mutating func transmit(_ text: String, on socket: Int, now: Date) -> Effect {
    lastSent = now
    return .send(socket: socket, text)
  }

  // MARK: Sockets and timers

  private mutating func closed(_ socket: Int, code: Int?, jitter: Double) -> [Effect] {
    var effects: [Effect] = [.cancel(.welcome(socket: socket)), .cancel(.keepalive(socket: socket))]
    if stallWatched == socket { effects += unwatchStall() }
    let attempt: Int
    switch link {
    case .welcomed(_, let ping):
      if ping != nil { effects.append(.cancel(.ping(socket: socket))) }
      attempt = 0
    case .greeting(_, let failed):
      attempt = failed + 1
    case .stopped, .fetchingToken, .waiting:
      return []
    }
    if let code, let close = CloseCode(rawValue: code), !close.shouldReconnect, close != .normal {
      return effects + stop(reason: "closed by the server with \(code)")
    }
    effects.append(.deliver(.disconnected))
    guard attempt > 0 else {
      // A welcomed socket dropped: reconnect at once.
      link = .fetchingToken(attempt: 0)
      return effects + [.fetchToken]
    }
    let backoff = configuration.backoff
    let base = backoff.isEmpty ? .seconds(1) : backoff[min(attempt, backoff.count - 1)]
    link = .waiting(attempt: attempt)
    return effects + [.arm(.reconnect, after: base * jitter)]
  }

  private mutating func timerFired(_ timer: Timer, now: Date) -> [Effect] {
    switch timer {
    case .welcome(let socket):
      guard case .greeting(socket, _) = link else { return [] }
      return [.close(socket: socket, code: CloseCode.goingAway.rawValue)]
    case .keepalive(let socket):
      guard socket == openSocket else { return [] }
      let next = Effect.arm(.keepalive(socket: socket), after: .seconds(heartbeat / 2))
      guard case .welcomed(_, nil) = link, now.timeIntervalSince(lastSent) >= heartbeat / 2 else { return [next] }
      nextID += 1
      let id = "\(idPrefix)-\(nextID)"
      link = .welcomed(socket: socket, ping: id)
      return [
        transmit(MessageCodec.encodeString(.ping(.init()), id: id), on: socket, now: now),
        .arm(.ping(socket: socket), after: configuration.pingTimeout),
      ]
    case .ping(let socket):
      guard case .welcomed(socket, _?) = link else { return [] }
      return [.close(socket: socket, code: CloseCode.goingAway.rawValue)]  // no answer: the socket is dead
    case .reconnect:
      guard case .waiting(let attempt) = link else { return [] }
      link = .fetchingToken(attempt: attempt)
      return [.fetchToken]
    case .ack:
      guard case .owed = acks else { return [] }
      acks = .upToDate
      guard let socket = welcomedSocket else { return [] }
      return [transmit(MessageCodec.encodeString(.ack(.init(seq: lastSeq)), id: nil), on: socket, now: now)]
    case .retry(let id):
      // A reconnect meanwhile has re-sent it already (or will).
      guard let socket = welcomedSocket, let request = pending[id] else { return [] }
      return [transmit(MessageCodec.encodeString(request.message, id: id), on: socket, now: now)]
    case .drainStall(let socket):
      guard stallWatched == socket else { return [] }
      stallWatched = nil
      return replaceStalledSocket(socket)
    }
  }
}
