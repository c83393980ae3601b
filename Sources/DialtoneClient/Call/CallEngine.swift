import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One call's media negotiation: trickle ICE, pending remote candidates, the ICE-restart policy,
/// glare and teardown. One actor per call; the app feeds it the call's server messages through
/// `handle(_:)` and observes `states`.
///
/// Every decision is `CallEngineMachine`'s (a pure value, tested directly); this actor is its
/// shell: it runs the effects one at a time, in order (peer-connection calls, signaling,
/// timers), and feeds their results back as events.
public actor CallEngine {
  public enum Role: Sendable, Equatable { case caller, callee }

  /// Why a call ended.
  public enum Ending: Sendable, Equatable {
    /// This device hung up (or cancelled / declined).
    case local
    /// The server ended it (`call-ended`), with its reason.
    case remote(EndReason)
    /// ICE could not be recovered after every restart attempt.
    case iceFailed
    /// Glare: this outgoing call was replaced; the app accepts the incoming call `replacedBy`.
    case glare(replacedBy: CallID)
    /// A local error (peer connection, signaling of invite/accept).
    case error(String)
  }

  /// Every state of a call.
  public enum State: Sendable, Equatable {
    case idle  // created; start() not yet called
    case calling  // caller: offer made, invite sent
    case ringing  // caller: a callee device is alerting
    case incoming  // callee: invite received (offer applied), waiting for accept()
    case connecting  // accepted; ICE/DTLS in progress
    case connected  // media flows
    case reconnecting(attempt: Int)  // ICE lost; 0 = waiting the disconnected grace, k = restart k
    case ended(Ending)  // terminal

    /// Glare: the incoming call the app must accept in place of this outgoing one.
    public var glareSurvivor: CallID? {
      if case .ended(.glare(let survivor)) = self { return survivor }
      return nil
    }
  }

  /// How the engine negotiates (trickle, data channel) and recovers ICE (rule 3).
  public struct Policy: Sendable, Equatable {
    /// How long `disconnected` may last before a restart.
    public var disconnectedGrace: Duration
    /// After a restart fails, the next one starts after these delays; when the restart after
    /// the last delay fails too, the call ends with `.iceFailed`.
    public var retryBackoff: [Duration]
    /// A restart that has not reached `connected` after this long counts as failed.
    public var attemptTimeout: Duration
    /// Trickle ICE (rule 2). False is the slow baseline the seeds warn about, kept for
    /// benchmarks: gather every candidate, then send them inside the offer or answer.
    public var trickle: Bool
    /// Without trickle: the longest wait for gathering to complete.
    public var gatheringTimeout: Duration
    /// Open a data channel (the caller creates it; the callee takes the caller's).
    public var dataChannel: Bool
    /// Pre-connect while ringing (protocol.md 11): the caller makes a leg for each callee
    /// device that asks, a callee asks. On by default; `CallClient` keeps it only when the
    /// server listed `preconnect` in `welcome`, and a callee's engine uses it only if the
    /// invite offered it. Needs trickle.
    public var preconnect = true
    /// A callee's pre-connect leg gathers relay candidates only (ICE transport policy
    /// `relay`), so a caller learns no host or server-reflexive address of a device that has
    /// not answered (docs/security.md). Without a TURN server among the call's ICE servers such
    /// a callee asks for no leg (the call is negotiated after Answer, as without pre-connect).
    /// Once answered on the leg, the connection may use every candidate
    /// (`PeerConnection.setIceTransportPolicy`). False: legs gather every candidate (a leg
    /// without TURN, on a LAN; the caller then sees the callee's addresses while it rings).
    public var privatePreconnect = true
    /// Send a `quality` report (protocol.md 7.19) when the call ends.
    public var reportsQuality = true
    /// Also send one every this long while connected (nil: only at the end). Each also looks
    /// at the statistics for the first media, when the app did not `markMilestone` it.
    public var qualityReportInterval: Duration?

    public init(
      disconnectedGrace: Duration = .seconds(4), retryBackoff: [Duration] = [.seconds(1), .seconds(2), .seconds(3)],
      attemptTimeout: Duration = .seconds(10), trickle: Bool = true, gatheringTimeout: Duration = .seconds(5),
      dataChannel: Bool = false
    ) {
      self.disconnectedGrace = disconnectedGrace
      self.retryBackoff = retryBackoff
      self.attemptTimeout = attemptTimeout
      self.trickle = trickle
      self.gatheringTimeout = gatheringTimeout
      self.dataChannel = dataChannel
    }
  }

  // MARK: Public surface

  public nonisolated let callId: CallID
  public nonisolated let role: Role
  /// State changes for the UI, starting with the current state; finishes when the call ends.
  public nonisolated let states: AsyncStream<State>
  /// Data-channel messages from the peer, across peer-connection replacements; finishes when
  /// the call ends.
  public nonisolated let dataMessages: AsyncStream<Data>
  /// The other side's camera going off (false) and on (true), as it tells us (`media-state`);
  /// finishes when the call ends.
  public nonisolated let remoteCamera: AsyncStream<Bool>
  /// The other side starting (true) and stopping (false) to send video, as its descriptions
  /// say (an upgrade to video and back); finishes when the call ends.
  public nonisolated let remoteVideo: AsyncStream<Bool>
  /// The other side putting the call on hold (true) and taking it off (false), as it tells us
  /// (`hold`): no audio comes from it meanwhile; finishes when the call ends.
  public nonisolated let remoteHold: AsyncStream<Bool>
  /// Pre-connect (protocol.md 11): a leg came up while ringing, by callee device id (the
  /// caller's legs) or "" (the callee's leg to the caller); finishes when the call ends.
  public nonisolated let legsConnected: AsyncStream<String>
  public var state: State { machine.state }
  /// This side sends video (a video call, or upgraded).
  public var sendsVideo: Bool { machine.sendsVideo }
  public var remoteSendsVideo: Bool { machine.remoteSendsVideo }
  /// Either side sends video: the call is a video call for the UI.
  public var hasVideo: Bool { machine.hasVideo }
  public var isMuted: Bool { machine.isMuted }
  public var isOnHold: Bool { machine.isOnHold }
  /// The other side holds the call.
  public var remoteIsOnHold: Bool { machine.remoteIsOnHold }
  public var isVideoEnabled: Bool { machine.isVideoEnabled }
  /// The remote device once known (the inviting caller, or the accepting callee).
  public var remotePeer: Peer? { machine.remotePeer }
  /// The quality report as it stands (milestones so far; statistics not included).
  public var qualityReport: QualityReport { quality.report(final: machine.isEnded, stats: nil, now: clock.now) }
  /// Once the call ended: the connection's last statistics (nil without a connection) and the
  /// final quality report made from them (its `mos` is the call's estimated speech quality),
  /// whoever hung up; nil before.
  public private(set) var finalStats: PeerConnectionStats?
  public private(set) var finalQualityReport: QualityReport?

  // MARK: The shell around `CallEngineMachine`

  /// Every decision; this actor only runs its effects and feeds their results back.
  private var machine: CallEngineMachine
  private let iceServers: [IceServer]
  private let factory: any PeerConnectionFactory
  private let signaling: any CallSignaling
  private let clock: any DialtoneClock
  private let stateContinuation: AsyncStream<State>.Continuation
  private let dataContinuation: AsyncStream<Data>.Continuation
  private let cameraContinuation: AsyncStream<Bool>.Continuation
  private let remoteVideoContinuation: AsyncStream<Bool>.Continuation
  private let remoteHoldContinuation: AsyncStream<Bool>.Continuation
  private let legsContinuation: AsyncStream<String>.Continuation
  private let outbox: AsyncStream<ClientMessage>.Continuation
  private let requests: AsyncStream<ClientMessage>
  private var senderTask: Task<Void, Never>?

  /// The current peer connection, with the generation the machine knows it by.
  private var connection: (generation: Int, pc: any PeerConnection)?
  private var listeners: [Task<Void, Never>] = []
  /// Pre-connected legs (9b) by generation, with their listeners.
  private var legs: [Int: (pc: any PeerConnection, listeners: [Task<Void, Never>])] = [:]
  private var timers: [CallEngineMachine.Timer: Task<Void, Never>] = [:]
  /// Effects not yet run, in order; one runner task at a time runs them.
  private var pending: [CallEngineMachine.Effect] = []
  private var running = false
  private var idleWaiters: [CheckedContinuation<Void, Never>] = []
  private var quality: CallQualityRecorder
  private let log: Log
  private var qualityTask: Task<Void, Never>?

  // MARK: Init

  /// An outgoing call to `remoteUserId`; `start()` makes the offer and sends the invite.
  public init(
    outgoingCallId callId: CallID = CallIDRules.generate(), to remoteUserId: String, video: Bool,
    iceServers: [IceServer], factory: any PeerConnectionFactory, signaling: any CallSignaling,
    clock: any DialtoneClock = SystemClock(), policy: Policy = Policy(), log: Log = .silent
  ) {
    self.init(
      callId: callId, role: .caller, remoteUserId: remoteUserId, remotePeer: nil, offer: nil, video: video,
      iceServers: iceServers, factory: factory, signaling: signaling, clock: clock, policy: policy, log: log)
  }

  /// An incoming call; `start()` applies the invite's offer, `accept()` answers.
  public init(
    incoming invite: ServerMessage.Invite,
    iceServers: [IceServer], factory: any PeerConnectionFactory, signaling: any CallSignaling,
    clock: any DialtoneClock = SystemClock(), policy: Policy = Policy(), log: Log = .silent
  ) {
    var policy = policy
    policy.preconnect = policy.preconnect && invite.preconnect
    self.init(
      callId: invite.callId, role: .callee, remoteUserId: invite.from.userId, remotePeer: invite.from,
      offer: invite.offer, video: invite.video,
      iceServers: iceServers, factory: factory, signaling: signaling, clock: clock, policy: policy, log: log)
  }

  private init(
    callId: CallID, role: Role, remoteUserId: String?, remotePeer: Peer?, offer: SessionDescription?,
    video: Bool, iceServers: [IceServer], factory: any PeerConnectionFactory,
    signaling: any CallSignaling, clock: any DialtoneClock, policy: Policy, log: Log
  ) {
    self.callId = callId
    self.log = log.scoped("call")
    self.role = role
    machine = CallEngineMachine(
      callId: callId, role: role, remoteUserId: remoteUserId, remotePeer: remotePeer, offer: offer, video: video,
      policy: policy, relayAvailable: PreconnectLegs.offersRelay(iceServers))
    self.iceServers = iceServers
    self.factory = factory
    self.signaling = signaling
    self.clock = clock
    quality = CallQualityRecorder(callId: callId, origin: clock.now)
    (states, stateContinuation) = AsyncStream<State>.makeStream(bufferingPolicy: .unbounded)
    stateContinuation.yield(.idle)
    (dataMessages, dataContinuation) = AsyncStream<Data>.makeStream(bufferingPolicy: .bufferingNewest(256))
    (remoteCamera, cameraContinuation) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(16))
    (remoteVideo, remoteVideoContinuation) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(16))
    (remoteHold, remoteHoldContinuation) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(16))
    (legsConnected, legsContinuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(16))
    (requests, outbox) = AsyncStream<ClientMessage>.makeStream(bufferingPolicy: .unbounded)
  }

  // MARK: Call control (each returns once everything it set off has run)

  /// Caller: create the peer connection, offer and send the invite. Callee: create the peer
  /// connection and apply the invite's offer (the answer waits for `accept()`).
  public func start() async { await submit(.start) }

  /// Callee: answer (or, if the invite carried no offer, accept and wait for the offer).
  public func accept() async { await submit(.accept) }

  /// Hang up: cancel (caller, before accept), decline (callee, before accept) or hangup.
  public func hangup() async { await submit(.hangup) }

  public func setMuted(_ muted: Bool) async { await submit(.setMuted(muted)) }

  /// Hold: the microphone is off while held (the call and its connection stay up), and the
  /// other side is told (`hold`).
  public func setOnHold(_ held: Bool) async { await submit(.setOnHold(held)) }

  /// The camera off or on while sending video (no renegotiation; the peer gets `media-state`).
  public func setVideoEnabled(_ enabled: Bool) async { await submit(.setVideoEnabled(enabled)) }

  /// Start or stop sending video (upgrade an audio call to video, and back), by renegotiation
  /// once the call is up; safe when both sides do it at once (protocol.md 10).
  public func setSendsVideo(_ sends: Bool) async { await submit(.setSendsVideo(sends)) }

  /// Feeds one server message; messages for other calls are ignored.
  public func handle(_ message: ServerMessage) async {
    guard message.callId == callId else { return }
    await submit(.server(message))
  }

  public func stats() async -> PeerConnectionStats? {
    await connection?.pc.stats()
  }

  /// A milestone the app's media layer saw (first audio decoded, ICE connected), at its time:
  /// more precise than what the engine infers from states and statistics.
  public func markMilestone(_ milestone: CallQualityRecorder.Milestone, at date: Date) {
    quality.mark(milestone, at: date)
  }

  public func sendData(_ data: Data) async throws {
    guard let pc = connection?.pc, !machine.isEnded else { throw CallEngineError.notActive }
    try await pc.sendData(data)
  }

  /// Returns once every effect set off so far has run: for an ended call, its connections
  /// are closed (and their TURN allocations released) when this returns.
  public func settle() async {
    guard running else { return }
    await withCheckedContinuation { idleWaiters.append($0) }
  }

  /// Waits until every request queued so far has been handed to `CallSignaling` (after the
  /// call ended). Useful for tests and for apps that want the hangup out before suspending.
  public func drainSignaling() async {
    await senderTask?.value
  }

  // MARK: Running the machine

  private func submit(_ event: CallEngineMachine.Event) async {
    feed(event)
    guard running else { return }
    await withCheckedContinuation { idleWaiters.append($0) }
  }

  /// Applies an event; its effects run after those already queued, on the runner task (never on
  /// a listener's task: closing a connection waits for its listeners).
  private func feed(_ event: CallEngineMachine.Event) {
    let before = machine.state
    let effects = machine.handle(event)
    if machine.state != before {
      log.info("\(role) \(before) → \(machine.state)", callId: callId)
      stateContinuation.yield(machine.state)
      quality.observe(machine.state, at: clock.now)
      if machine.state == .connected { startInterimReports() }
    }
    guard !effects.isEmpty else { return }
    pending += effects
    guard !running else { return }
    running = true
    Task { await self.runPending() }
  }

  private func runPending() async {
    while !pending.isEmpty {
      await run(pending.removeFirst())
    }
    running = false
    let waiters = idleWaiters
    idleWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  private func run(_ effect: CallEngineMachine.Effect) async {
    switch effect {
    case .replaceConnection(let gen):
      await replaceConnection(gen)
    case .makeLeg(let gen, let policy):
      await makeLeg(gen, policy)
    case .closeLeg(let gen):
      await closeLeg(gen)
    case .adoptLeg(let gen):
      guard let leg = legs.removeValue(forKey: gen) else { return }
      await detachAndClose()
      connection = (gen, leg.pc)
      listeners = leg.listeners
    case .releaseMedia(let gen):
      await current(gen)?.releaseMedia()
    case .setIceTransportPolicy(let gen, let policy):
      await current(gen)?.setIceTransportPolicy(policy)
    case .legConnected(let device):
      legsContinuation.yield(device)
    case .createOffer(let gen, let iceRestart):
      guard let pc = current(gen) else { return }
      do { feed(.offerCreated(generation: gen, try await pc.createOffer(iceRestart: iceRestart))) } catch {
        feed(.localDescriptionFailed(generation: gen, "\(error)"))
      }
    case .createAnswer(let gen):
      guard let pc = current(gen) else { return }
      do { feed(.answerCreated(generation: gen, try await pc.createAnswer())) } catch {
        feed(.localDescriptionFailed(generation: gen, "\(error)"))
      }
    case .setLocal(let gen, let description, let kind):
      guard let pc = current(gen) else { return }
      do {
        try await pc.setLocalDescription(description, kind: kind)
        feed(.localDescriptionSet(generation: gen))
      } catch {
        feed(.localDescriptionFailed(generation: gen, "\(error)"))
      }
    case .setRemote(let gen, let description, let kind):
      guard let pc = current(gen) else { return }
      do {
        try await pc.setRemoteDescription(description, kind: kind)
        feed(.remoteDescriptionSet(generation: gen))
      } catch {
        feed(.remoteDescriptionFailed(generation: gen, "\(error)"))
      }
    case .addCandidate(let gen, let candidate):
      // A candidate the connection refuses (bad line, unknown m-line) is dropped: ICE goes on.
      try? await current(gen)?.addRemoteCandidate(candidate)
    case .setAudio(let gen, let enabled):
      await current(gen)?.setAudioEnabled(enabled)
    case .setVideo(let gen, let enabled):
      await current(gen)?.setVideoEnabled(enabled)
    case .setVideoDirection(let gen, let direction):
      await current(gen)?.setVideoDirection(direction)
    case .send(let request):
      send(request)
    case .remoteCamera(let on):
      cameraContinuation.yield(on)
    case .remoteVideo(let sends):
      remoteVideoContinuation.yield(sends)
    case .remoteHold(let held):
      remoteHoldContinuation.yield(held)
    case .arm(let timer, let delay):
      timers[timer]?.cancel()
      timers[timer] = Task { [weak self, clock] in
        do { try await clock.sleep(for: delay) } catch { return }
        await self?.feed(.timerFired(timer))
      }
    case .cancel(let timer):
      timers.removeValue(forKey: timer)?.cancel()
    case .finish:
      for timer in timers.values { timer.cancel() }
      timers.removeAll()
      qualityTask?.cancel()
      // Read before the connection closes: the app shows them once the call ended.
      finalStats = await connection?.pc.stats()
      let report = quality.report(final: true, stats: finalStats, now: clock.now)
      finalQualityReport = report
      if machine.policy.reportsQuality { outbox.yield(.quality(report)) }
      outbox.finish()  // queued requests (e.g. the hangup) still go out, in order
      await detachAndClose()
      for gen in legs.keys.sorted() { await closeLeg(gen) }
      dataContinuation.finish()
      cameraContinuation.finish()
      remoteVideoContinuation.finish()
      remoteHoldContinuation.finish()
      legsContinuation.finish()
      stateContinuation.finish()
    }
  }

  /// The connection of generation `gen`, if it is still the current one or a leg and the call
  /// goes on.
  private func current(_ gen: Int) -> (any PeerConnection)? {
    guard !machine.isEnded else { return nil }
    if let connection, connection.generation == gen { return connection.pc }
    return legs[gen]?.pc
  }

  // MARK: Peer connection lifecycle

  private func replaceConnection(_ gen: Int) async {
    await detachAndClose()
    let made: any PeerConnection
    do {
      made = try await factory.makePeerConnection(
        PeerConnectionConfiguration(
          iceServers: iceServers, video: true, dataChannel: machine.policy.dataChannel))
    } catch {
      feed(.connectionFailed(generation: gen, "\(error)"))
      return
    }
    guard !machine.isEnded, machine.generation == gen else {
      await made.close()
      return
    }
    connection = (gen, made)
    listeners = listen(to: made, generation: gen)
    feed(.connectionMade(generation: gen, canRestartIce: made.canRestartIce))
  }

  private func listen(to made: any PeerConnection, generation gen: Int) -> [Task<Void, Never>] {
    [
      Task { [weak self] in
        for await candidate in made.localCandidates { await self?.feed(.localCandidate(generation: gen, candidate)) }
      },
      Task { [weak self] in
        for await s in made.connectionStates { await self?.feed(.connectionState(generation: gen, s)) }
      },
      Task { [weak self] in
        for await data in made.dataChannelMessages { await self?.dataReceived(data, generation: gen) }
      },
    ]
  }

  /// A leg's connection, beside the current one, with its media held until the call is
  /// accepted on it, gathering what `policy` allows.
  private func makeLeg(_ gen: Int, _ policy: IceTransportPolicy) async {
    let made: any PeerConnection
    do {
      var configuration = PeerConnectionConfiguration(
        iceServers: iceServers, video: true, dataChannel: machine.policy.dataChannel)
      configuration.mediaHeld = true
      configuration.iceTransportPolicy = policy
      made = try await factory.makePeerConnection(configuration)
    } catch {
      feed(.connectionFailed(generation: gen, "\(error)"))
      return
    }
    guard !machine.isEnded else {
      await made.close()
      return
    }
    legs[gen] = (made, listen(to: made, generation: gen))
    feed(.connectionMade(generation: gen, canRestartIce: made.canRestartIce))
  }

  private func closeLeg(_ gen: Int) async {
    guard let leg = legs.removeValue(forKey: gen) else { return }
    for task in leg.listeners { task.cancel() }
    for task in leg.listeners { await task.value }
    await leg.pc.close()
  }

  private func dataReceived(_ data: Data, generation gen: Int) {
    // The current connection's only: nothing said on a leg before the accept reaches the app.
    guard !machine.isEnded, connection?.generation == gen else { return }
    dataContinuation.yield(data)
  }

  /// Teardown order: stop listening and wait until the listeners are gone, and only then close
  /// the connection, so events it emits while closing never reach the call (the machine also
  /// ignores any event of an older generation).
  private func detachAndClose() async {
    let old = connection?.pc
    connection = nil
    let tasks = listeners
    listeners = []
    for task in tasks { task.cancel() }
    for task in tasks { await task.value }
    await old?.close()
  }

  // MARK: Quality reports

  private func startInterimReports() {
    guard qualityTask == nil, machine.policy.reportsQuality, let interval = machine.policy.qualityReportInterval
    else { return }
    qualityTask = Task { [weak self, clock] in
      while !Task.isCancelled {
        do { try await clock.sleep(for: interval) } catch { return }
        await self?.sendInterimReport()
      }
    }
  }

  private func sendInterimReport() async {
    guard !machine.isEnded, let pc = connection?.pc else { return }
    let stats = await pc.stats()
    guard !machine.isEnded else { return }
    quality.observe(stats, at: clock.now)
    send(.quality(quality.report(final: false, stats: stats, now: clock.now)))
  }

  // MARK: Signaling

  private func send(_ request: ClientMessage) {
    if senderTask == nil {
      // One sender, in order: an offer always leaves before the candidates gathered after it.
      senderTask = Task { [weak self, signaling, requests] in
        for await request in requests {
          do {
            try await signaling.send(request)
          } catch {
            // Only these decide the call; anything else is delivered at least once (a lost
            // socket resumes).
            if request.type == .invite || request.type == .accept {
              await self?.feed(.signalingFailed("\(error)"))
            }
          }
        }
      }
    }
    outbox.yield(request)
  }
}

public enum CallEngineError: Error, Sendable, Equatable {
  case notActive
}
