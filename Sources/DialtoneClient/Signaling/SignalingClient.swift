import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The device's signaling connection: connects and authenticates, reconnects with jittered
/// backoff, resumes its session so no server message is lost across a dropped socket, re-sends
/// requests that were never answered (with their original ids, so the server applies them once),
/// acks what it processed, pings when idle, and reconnects at once on a network change.
///
/// Every decision is `SignalingMachine`'s (a pure value, tested directly); this actor is its
/// shell: it runs the effects (sockets, the token, timers on the injected clock) and hands each
/// answer to the caller awaiting it.
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
    /// While `stop(draining:)` waits, a welcomed socket that answers none of the pending
    /// requests for this long is given up for a fresh one, which resumes the session and
    /// re-sends them (same ids: nothing applies twice). On a congested link TCP can hold what is
    /// written behind a lost segment whose retransmission timer doubled with each loss, for
    /// longer than any grace; a new connection starts with short timers. Long enough for an
    /// answer across a slow but working link: replacing such a socket only costs a handshake.
    public var drainStall: Duration = .seconds(1)
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

  public enum Event: Sendable, Equatable {
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
  public var userId: String? { machine.userId }
  /// The protocol extensions the server agreed to in the last `welcome` (empty before it).
  public var agreedFeatures: Set<String> { machine.agreedFeatures }
  private let eventSink: AsyncStream<Event>.Continuation
  private let configuration: Configuration
  private let transport: any SignalingTransport
  private let token: @Sendable () async throws -> String
  private let clock: any DialtoneClock
  private let log: Log

  private var machine: SignalingMachine
  private var sockets: [Int: any SignalingSocket] = [:]
  /// Armed timers; the number tells a firing from a timer armed again since.
  private var timers: [SignalingMachine.Timer: (number: Int, task: Task<Void, Never>)] = [:]
  private var timersArmed = 0
  /// The answers awaited, by request id.
  private var replies: [String: AsyncThrowingStream<ServerMessage, any Error>.Continuation] = [:]
  /// `stop(draining:)` callers waiting for every pending request to be answered.
  private var drainWaiters: [CheckedContinuation<Void, Never>] = []

  public init(
    configuration: Configuration, transport: any SignalingTransport, clock: any DialtoneClock = SystemClock(),
    log: Log = .silent, token: @escaping @Sendable () async throws -> String
  ) {
    self.clock = clock
    self.log = log.scoped("signaling")
    self.configuration = configuration
    self.transport = transport
    self.token = token
    machine = SignalingMachine(
      configuration: configuration, idPrefix: String(UInt32.random(in: 0...UInt32.max), radix: 36), now: clock.now)
    (events, eventSink) = AsyncStream<Event>.makeStream()
  }

  public func start() { feed(.start) }

  public func stop() { feed(.stop) }

  /// Stops once every request sent so far has been answered, or after `grace`. An app that
  /// quits right after hanging up needs this: `stop()` drops an unanswered `hangup` with the
  /// socket, and on a congested or lossy link the server then learns of it only when the other
  /// side's media times out. Meanwhile a socket that answers nothing for
  /// `Configuration.drainStall` is replaced by a fresh one (see there).
  public func stop(draining grace: Duration) async {
    guard machine.isRunning, machine.hasPending, grace > .zero else { return stop() }
    let timer = Task { [clock] in
      try? await clock.sleep(for: grace)
      self.releaseDrainWaiters()
    }
    await withCheckedContinuation {
      drainWaiters.append($0)
      feed(.drain)
    }
    timer.cancel()
    stop()
  }

  /// The network changed (Wi-Fi → cellular): the old socket is probably dead; reconnect now.
  public func networkChanged() { feed(.networkChanged) }

  /// Sends a request and returns the server's answer (`ack` or `error`). It survives reconnects:
  /// an unanswered request is re-sent with the same id after the session resumes.
  public func request(_ message: ClientMessage) async throws -> ServerMessage {
    try await submit(message).value
  }

  /// Queues a request (sent in call order) and returns at once; the answer is awaited on the
  /// returned `SignalingReply`, or not at all. Pipelining matters on slow links: a trickled
  /// candidate must not wait a round trip for the ack of the one before it.
  public func submit(_ message: ClientMessage) throws -> SignalingReply {
    guard let (id, effects) = machine.submit(message, now: clock.now) else { throw SignalingClientError.stopped }
    log.debug("sending \(message.type.rawValue)", callId: message.callId)
    let (stream, continuation) = AsyncThrowingStream<ServerMessage, any Error>.makeStream(
      bufferingPolicy: .bufferingNewest(1))
    replies[id] = continuation
    run(effects)
    return SignalingReply(stream: stream)
  }

  // MARK: - Running the machine

  private func feed(_ event: SignalingMachine.Event) {
    run(machine.handle(event, now: clock.now))
  }

  private func run(_ effects: [SignalingMachine.Effect]) {
    for effect in effects { run(effect) }
  }

  private func run(_ effect: SignalingMachine.Effect) {
    switch effect {
    case .fetchToken:
      let token = self.token
      Task {
        do {
          self.feed(.tokenFetched(try await token()))
        } catch {
          self.log.warning("could not get a token: \(error)")
          self.feed(.tokenFailed("\(error)"))
        }
      }
    case .open(let id, let hello):
      log.debug("opening a socket (#\(id))")
      let socket = transport.open(url: configuration.url, bearerToken: nil)
      sockets[id] = socket
      socket.send(hello)
      Task { await self.read(socket, id) }
    case .send(let id, let text):
      sockets[id]?.send(text)
    case .close(let id, let code):
      sockets[id]?.close(code: code)
    case .deliver(let event):
      say(event)
      eventSink.yield(event)
    case .reply(let id, let message):
      let reply = replies.removeValue(forKey: id)
      reply?.yield(message)
      reply?.finish()
    case .failAll:
      for reply in replies.values { reply.finish(throwing: SignalingClientError.stopped) }
      replies = [:]
      releaseDrainWaiters()
    case .drained:
      releaseDrainWaiters()
    case .arm(let timer, let delay):
      timers[timer]?.task.cancel()
      timersArmed += 1
      let number = timersArmed
      timers[timer] = (
        number,
        Task { [clock] in
          do { try await clock.sleep(for: delay) } catch { return }
          self.fired(timer, number)
        }
      )
    case .cancel(let timer):
      timers.removeValue(forKey: timer)?.task.cancel()
    }
  }

  private func fired(_ timer: SignalingMachine.Timer, _ number: Int) {
    guard timers[timer]?.number == number else { return }  // cancelled or armed again meanwhile
    timers[timer] = nil
    feed(.timerFired(timer))
  }

  /// Feeds a socket's frames, then its end.
  private func read(_ socket: any SignalingSocket, _ id: Int) async {
    var closeCode: Int?
    for await event in socket.events {
      switch event {
      case .opened: continue
      case .text(let text): feed(.received(socket: id, text))
      case .closed(let code): closeCode = code
      }
    }
    sockets[id] = nil
    log.info("socket #\(id) closed (\(closeCode.map { "code \($0)" } ?? "no close frame"))")
    feed(.closed(socket: id, code: closeCode, jitter: Double.random(in: 0.5...1.5)))
  }

  /// What the app's log hears of the connection's life (never the token or a message's content).
  private func say(_ event: Event) {
    switch event {
    case .connected(let welcome):
      log.info(
        welcome.resumed ? "session resumed" : "signed in as \(welcome.userId)/\(welcome.deviceId), new session",
        sessionId: welcome.sessionId)
    case .disconnected: log.warning("disconnected; reconnecting")
    case .resynced: log.warning("the session could not be resumed: calls are re-fetched")
    case .stopped(let reason): log.info("stopped: \(reason)")
    case .message(let message): log.debug("received \(message.typeName)", callId: message.callId)
    }
  }

  private func releaseDrainWaiters() {
    let waiters = drainWaiters
    drainWaiters.removeAll()
    for waiter in waiters { waiter.resume() }
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
