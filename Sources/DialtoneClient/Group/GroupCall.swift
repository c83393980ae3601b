import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One device's part in a group call, whose media goes through the server's SFU.
///
/// With Janus (proxied) the device has one `publisher` connection that sends its audio (and,
/// in a video call, its camera), and receives the others either on one receive-only connection
/// per other participant (`group-offer` of a `feed-…` stream each), or — `multistream`, when
/// the server grants it — on one `subscriber` connection whose sections the SFU adds and
/// deactivates by renegotiating it (protocol.md 20.9). With LiveKit the server hands over
/// `{url, token}` (`Event.liveKit`) and the app connects LiveKit's SDK, which receives everyone
/// on one connection of its own.
///
/// The app feeds the call's server messages through `handle(_:)` (`CallClient` does) and
/// observes `events`.
///
/// Every decision is `GroupCallMachine`'s (a pure value, tested directly); this actor is its
/// shell: it runs the effects (connections, signaling) and feeds their results back. Each
/// stream's effects run in order on a lane of their own, so the connections of offered streams
/// are made side by side (a device joining a call of eight gets seven offers at once); messages
/// to the server leave in order on one lane.
public actor GroupCall {
  public enum State: Sendable, Equatable {
    /// A ring: `join()` to answer, `decline()` to refuse.
    case ringing
    /// Joining: waiting for the server and the SFU.
    case joining
    /// In the call (the publisher may still be connecting).
    case joined
    /// Over for this device: left here (`nil`), or ended by the server with its reason.
    case ended(GroupEndReason?)
  }

  public enum Event: Sendable {
    case state(State)
    /// The participant list changed.
    case participants(GroupCallState)
    /// LiveKit: connect to `url` with `token`.
    case liveKit(url: String, token: String)
    /// A remote participant's media arrived: on its own connection, or (stream `subscriber`)
    /// on the single subscriber connection, which then carries several participants (the
    /// engine was told which of its sections carries whom).
    case remoteStreamAdded(stream: String, from: Peer, connection: any PeerConnection)
    /// A remote stream's connection state changed.
    case remoteStreamState(stream: String, from: Peer, PeerConnectionState)
    /// A remote participant's stream is gone (they left); on the subscriber connection, their
    /// sections went inactive.
    case remoteStreamRemoved(stream: String, from: Peer)
    /// This device's own publisher connection changed state.
    case publisherState(PeerConnectionState)
    /// A request failed or a connection could not be made.
    case error(String)
  }

  /// How the call was entered.
  public enum Entry: Sendable, Equatable {
    case create(members: [String], title: String?)
    case invited(ServerMessage.GroupInvite)
    case join
    /// A room by name, already joined by `CallClient.joinRoom` (which learns the call's id).
    case joinedRoom(GroupCallState)
  }

  public nonisolated let callId: CallID
  public nonisolated let entry: Entry
  public nonisolated let video: Bool
  public nonisolated let events: AsyncStream<Event>
  public var state: State { machine.state }
  public var group: GroupCallState? { machine.group }
  public var isMuted: Bool { machine.isMuted }

  private var machine: GroupCallMachine
  private let signaling: any GroupSignaling
  private let factory: any PeerConnectionFactory
  private let clock: any DialtoneClock
  /// The streams' recovery timers (rule 3), by token.
  private var timers: [Int: Task<Void, Never>] = [:]
  private let eventSink: AsyncStream<Event>.Continuation
  private let inbox: AsyncStream<ServerMessage>
  private let inboxSink: AsyncStream<ServerMessage>.Continuation
  private var pump: Task<Void, Never>?

  private typealias StreamRef = GroupCallMachine.StreamRef
  private typealias Effect = GroupCallMachine.Effect
  /// Each stream's connection and the tasks listening to it.
  private var connections: [StreamRef: (pc: any PeerConnection, listeners: [Task<Void, Never>])] = [:]
  /// Where an effect runs: with its stream's, or with the call's messages.
  private enum Lane: Hashable {
    case call
    case stream(StreamRef)
  }
  /// Each busy lane's effects not yet done (the first one is running).
  private var queued: [Lane: [Effect]] = [:]
  /// Requests whose answer is awaited.
  private var requests = 0
  private var idleWaiters: [CheckedContinuation<Void, Never>] = []
  /// How long a decline, leave or end waits for the server to take it.
  static let settleGrace = Duration.seconds(3)

  public init(
    callId: CallID, entry: Entry, video: Bool = false, iceServers: [IceServer], factory: any PeerConnectionFactory,
    signaling: any GroupSignaling, multistream: Bool = false, clock: any DialtoneClock = SystemClock(),
    recovery: IceRecovery.Policy = .init()
  ) {
    self.callId = callId
    self.entry = entry
    self.video = video
    self.factory = factory
    self.signaling = signaling
    self.clock = clock
    machine = GroupCallMachine(
      callId: callId, entry: entry, video: video, iceServers: iceServers, multistream: multistream,
      offersAhead: true, recoveryPolicy: recovery)
    (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    (inbox, inboxSink) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
  }

  // MARK: - Actions (each returns once what it set off has run)

  /// Creates, joins or answers the call as `entry` says. Returns the call's id as the server
  /// knows it (a room's live call may have another id than the one proposed), nil if it was
  /// refused.
  @discardableResult
  public func start() async -> CallID? {
    if pump == nil {
      let inbox = self.inbox
      pump = Task { [weak self] in
        for await message in inbox { await self?.feed(.server(message)) }
      }
    }
    await submit(.start)
    if case .invited = entry { return callId }
    return machine.joinedAs
  }

  /// Answers a ring.
  public func join() async { await submit(.join) }

  /// Refuses a ring (for every device of this user).
  public func decline() async { await submit(.decline) }

  /// Leaves the call; it goes on for the others.
  public func leave() async { await submit(.leave) }

  /// Ends the call for everyone (the creator only; before anyone joined, it cancels the ring).
  public func endForAll() async { await submit(.endForAll) }

  /// Rings more users into the call (answers come as `participants`; a refusal as `error`).
  public func invite(_ members: [String]) async { await submit(.invite(members)) }

  /// Takes a member out of the call (the call's owner only; a refusal comes as `error`).
  public func remove(_ userId: String) async { await submit(.remove(userId)) }

  public func setMuted(_ muted: Bool) async { await submit(.setMuted(muted)) }

  /// The device's network path changed: every connection of the call restarts now (the SFU is
  /// one host, so they all lost the path they used; a send-only publisher may not notice).
  /// Returns at once: the restarts go on while signaling reconnects.
  public func networkChanged() { feed(.networkChanged) }

  /// The statistics of each connection, by stream.
  public func stats() async -> [String: PeerConnectionStats] {
    var result: [String: PeerConnectionStats] = [:]
    for (ref, connection) in connections { result[ref.id] = await connection.pc.stats() }
    return result
  }

  // MARK: - Server messages

  /// Takes the call's server messages in order, without waiting (`CallClient` delivers here).
  public nonisolated func receive(_ message: ServerMessage) {
    inboxSink.yield(message)
  }

  /// Handles one message and waits for what it started (an offered stream's connection too).
  public func handle(_ message: ServerMessage) async { await submit(.server(message)) }

  // MARK: - Running the machine

  private func submit(_ event: GroupCallMachine.Event) async {
    feed(event)
    guard isBusy else { return }
    await withCheckedContinuation { idleWaiters.append($0) }
  }

  private var isBusy: Bool { !queued.isEmpty || requests > 0 }

  private func feed(_ event: GroupCallMachine.Event) {
    for effect in machine.handle(event) {
      // At once, before a connection the same event makes can ask the factory for it.
      if case .prepareConnections(let configurations) = effect {
        factory.prepare(configurations)
        continue
      }
      let lane = Self.lane(of: effect)
      if queued[lane] != nil {
        queued[lane]?.append(effect)
      } else {
        queued[lane] = [effect]
        Task { await self.run(lane) }
      }
    }
  }

  private static func lane(of effect: Effect) -> Lane {
    switch effect {
    case .makeConnection(let ref, _), .setAudio(let ref, _), .setVideoDirection(let ref, _), .setVideo(let ref, _),
      .setRemoteSections(let ref, _), .createOffer(let ref), .createRestartOffer(let ref), .createAnswer(let ref),
      .setLocal(let ref, _, _),
      .setRemote(let ref, _, _),
      .addCandidate(let ref, _), .close(let ref):
      return .stream(ref)
    case .send, .request, .ask, .settle, .notify, .finish, .arm, .cancel, .prepareConnections:
      return .call
    }
  }

  /// Runs a lane's effects in order until it is empty.
  private func run(_ lane: Lane) async {
    while let effect = queued[lane]?.first {
      await run(effect)
      queued[lane]?.removeFirst()
      if queued[lane]?.isEmpty == true { queued[lane] = nil }
    }
    settleIfIdle()
  }

  private func settleIfIdle() {
    guard !isBusy else { return }
    let waiters = idleWaiters
    idleWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  private func run(_ effect: Effect) async {
    switch effect {
    case .send(let message):
      _ = try? await signaling.send(message)
    case .request(let message):
      requests += 1
      let signaling = self.signaling
      Task {
        let event: GroupCallMachine.Event
        do { event = .replied(try await signaling.request(message)) } catch { event = .requestFailed("\(error)") }
        self.answered(event)
      }
    case .ask(let message):
      requests += 1
      let signaling = self.signaling
      Task {
        let event: GroupCallMachine.Event
        do { event = .asked(try await signaling.request(message)) } catch { event = .askFailed("\(error)") }
        self.answered(event)
      }
    case .settle(let message):
      let signaling = self.signaling
      await withTaskGroup(of: Void.self) { group in
        group.addTask { _ = try? await signaling.request(message) }
        group.addTask { try? await Task.sleep(for: Self.settleGrace) }
        await group.next()
        group.cancelAll()
      }
      feed(.settled)
    case .makeConnection(let ref, let configuration):
      await makeConnection(ref, configuration)
    case .prepareConnections:
      break  // `feed` runs it at once and never queues it
    case .setAudio(let ref, let enabled):
      await connections[ref]?.pc.setAudioEnabled(enabled)
    case .setVideoDirection(let ref, let direction):
      await connections[ref]?.pc.setVideoDirection(direction)
    case .setVideo(let ref, let enabled):
      await connections[ref]?.pc.setVideoEnabled(enabled)
    case .setRemoteSections(let ref, let sections):
      await connections[ref]?.pc.setRemoteSections(sections)
    case .createOffer(let ref):
      guard let pc = connections[ref]?.pc else { return }
      do { feed(.descriptionCreated(ref, try await pc.createOffer(iceRestart: false))) } catch {
        feed(.descriptionFailed(ref, "\(error)"))
      }
    case .createRestartOffer(let ref):
      guard let pc = connections[ref]?.pc else { return }
      do { feed(.descriptionCreated(ref, try await pc.createOffer(iceRestart: true))) } catch {
        feed(.descriptionFailed(ref, "\(error)"))
      }
    case .arm(let token, let delay):
      timers[token]?.cancel()
      timers[token] = Task { [weak self, clock] in
        do { try await clock.sleep(for: delay) } catch { return }
        await self?.timerFired(token)
      }
    case .cancel(let token):
      timers.removeValue(forKey: token)?.cancel()
    case .createAnswer(let ref):
      guard let pc = connections[ref]?.pc else { return }
      do { feed(.descriptionCreated(ref, try await pc.createAnswer())) } catch {
        feed(.descriptionFailed(ref, "\(error)"))
      }
    case .setLocal(let ref, let description, let kind):
      guard let pc = connections[ref]?.pc else { return }
      do {
        try await pc.setLocalDescription(description, kind: kind)
        feed(.localDescriptionSet(ref))
      } catch {
        feed(.descriptionFailed(ref, "\(error)"))
      }
    case .setRemote(let ref, let description, let kind):
      guard let pc = connections[ref]?.pc else { return }
      do {
        try await pc.setRemoteDescription(description, kind: kind)
        feed(.remoteDescriptionSet(ref))
      } catch {
        feed(.descriptionFailed(ref, "\(error)"))
      }
    case .addCandidate(let ref, let candidate):
      try? await connections[ref]?.pc.addRemoteCandidate(candidate)
    case .close(let ref):
      await close(ref)
    case .notify(let notice):
      eventSink.yield(event(for: notice))
    case .finish(let final):
      inboxSink.finish()
      for timer in timers.values { timer.cancel() }
      timers = [:]
      for ref in connections.keys.sorted(by: { $0.generation < $1.generation }) { await close(ref) }
      eventSink.yield(.state(final))
      eventSink.finish()
    }
  }

  private func timerFired(_ token: Int) {
    guard timers.removeValue(forKey: token) != nil else { return }
    feed(.timerFired(token))
  }

  private func answered(_ event: GroupCallMachine.Event) {
    requests -= 1
    feed(event)
    settleIfIdle()
  }

  private func event(for notice: GroupCallMachine.Notice) -> Event {
    switch notice {
    case .state(let state): return .state(state)
    case .participants(let group): return .participants(group)
    case .liveKit(let url, let token): return .liveKit(url: url, token: token)
    case .remoteStreamAdded(let ref, let from):
      // Notified right after its connection is made (a stream that ended meanwhile is not).
      guard let pc = connections[ref]?.pc else { return .error("stream \(ref.id) closed before it was added") }
      return .remoteStreamAdded(stream: ref.id, from: from, connection: pc)
    case .remoteStreamState(let stream, let from, let state):
      return .remoteStreamState(stream: stream, from: from, state)
    case .remoteStreamRemoved(let stream, let from): return .remoteStreamRemoved(stream: stream, from: from)
    case .publisherState(let state): return .publisherState(state)
    case .error(let text): return .error(text)
    }
  }

  // MARK: - Connections

  private func makeConnection(_ ref: StreamRef, _ configuration: PeerConnectionConfiguration) async {
    let made: any PeerConnection
    do {
      made = try await factory.makePeerConnection(configuration)
    } catch {
      feed(.connectionFailed(ref, "\(error)"))
      return
    }
    guard !machine.isEnded else { return await made.close() }
    connections[ref] = (made, listen(made, ref))
    feed(.connectionMade(ref, canRestartIce: made.canRestartIce))
  }

  /// Feeds the connection's candidates and states to the machine.
  private func listen(_ connection: any PeerConnection, _ ref: StreamRef) -> [Task<Void, Never>] {
    [
      Task { [weak self] in
        for await candidate in connection.localCandidates { await self?.feed(.localCandidate(ref, candidate)) }
      },
      Task { [weak self] in
        for await state in connection.connectionStates { await self?.feed(.connectionState(ref, state)) }
      },
    ]
  }

  private func close(_ ref: StreamRef) async {
    guard let connection = connections.removeValue(forKey: ref) else { return }
    for listener in connection.listeners { listener.cancel() }
    await connection.pc.close()
  }
}
