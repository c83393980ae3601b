import DialtoneProtocol
import Foundation

/// One call's media negotiation: trickle ICE, pending remote candidates, the ICE-restart policy,
/// glare and teardown. One actor per call; the app feeds it the call's server messages through
/// `handle(_:)` and observes `states`.
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
    public var disconnectedGrace: Double
    /// After a restart fails, the next one starts after these delays; when the restart after
    /// the last delay fails too, the call ends with `.iceFailed`.
    public var retryBackoff: [Double]
    /// A restart that has not reached `connected` after this long counts as failed.
    public var attemptTimeout: Double
    /// Trickle ICE (rule 2). False is the slow baseline the seeds warn about, kept for
    /// benchmarks: gather every candidate, then send them inside the offer or answer.
    public var trickle: Bool
    /// Without trickle: the longest wait for gathering to complete.
    public var gatheringTimeout: Double
    /// Open a data channel (the caller creates it; the callee takes the caller's).
    public var dataChannel: Bool

    public init(
      disconnectedGrace: Double = 4, retryBackoff: [Double] = [1, 2, 3], attemptTimeout: Double = 10,
      trickle: Bool = true, gatheringTimeout: Double = 5, dataChannel: Bool = false
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
  public private(set) var state: State = .idle
  public private(set) var isMuted = false
  public private(set) var isOnHold = false
  public private(set) var isVideoEnabled: Bool
  /// The remote device once known (the inviting caller, or the accepting callee).
  public private(set) var remotePeer: Peer?

  // MARK: Dependencies

  private let remoteUserId: String?
  private let video: Bool
  private let iceServers: [IceServer]
  private let factory: any PeerConnectionFactory
  private let signaling: any CallSignaling
  private let clock: any ClientClock
  private let policy: Policy
  private let stateContinuation: AsyncStream<State>.Continuation
  private let dataContinuation: AsyncStream<Data>.Continuation
  private let outbox: AsyncStream<CallSignalingRequest>.Continuation
  private let requests: AsyncStream<CallSignalingRequest>
  private var senderTask: Task<Void, Never>?

  // MARK: Media state

  private var pc: (any PeerConnection)?
  /// Bumped whenever the current peer connection is detached: events of older ones are dropped.
  private var generation = 0
  private var listeners: [(id: Int, task: Task<Void, Never>)] = []
  private var nextListenerID = 0
  private var pendingOffer: SessionDescription?  // callee: offer waiting for accept()
  private var remoteReady = false  // remote description applied and buffer flushed
  private var pendingRemoteCandidates: [IceCandidate] = []
  /// Without trickle: local candidates gathered so far, and whether gathering finished.
  private var gathered: [IceCandidate] = []
  private var gatheringDone = false
  private var gatheringWaiters: [CheckedContinuation<Void, Never>] = []

  // MARK: ICE policy state

  private var restartAttempt = 0  // 0 = no restart in flight
  private var timer: Task<Void, Never>?
  private var timerToken = 0

  // MARK: Init

  /// An outgoing call to `remoteUserId`; `start()` makes the offer and sends the invite.
  public init(
    outgoingCallId callId: CallID = CallIDRules.generate(), to remoteUserId: String, video: Bool,
    iceServers: [IceServer], factory: any PeerConnectionFactory, signaling: any CallSignaling,
    clock: any ClientClock = SystemClientClock(), policy: Policy = Policy()
  ) {
    self.init(
      callId: callId, role: .caller, remoteUserId: remoteUserId, remotePeer: nil, offer: nil, video: video,
      iceServers: iceServers, factory: factory, signaling: signaling, clock: clock, policy: policy)
  }

  /// An incoming call; `start()` applies the invite's offer, `accept()` answers.
  public init(
    incoming invite: ServerMessage.Invite,
    iceServers: [IceServer], factory: any PeerConnectionFactory, signaling: any CallSignaling,
    clock: any ClientClock = SystemClientClock(), policy: Policy = Policy()
  ) {
    self.init(
      callId: invite.callId, role: .callee, remoteUserId: invite.from.userId, remotePeer: invite.from,
      offer: invite.offer, video: invite.video,
      iceServers: iceServers, factory: factory, signaling: signaling, clock: clock, policy: policy)
  }

  private init(
    callId: CallID, role: Role, remoteUserId: String?, remotePeer: Peer?, offer: SessionDescription?,
    video: Bool, iceServers: [IceServer], factory: any PeerConnectionFactory,
    signaling: any CallSignaling, clock: any ClientClock, policy: Policy
  ) {
    self.callId = callId
    self.role = role
    self.remoteUserId = remoteUserId
    self.remotePeer = remotePeer
    self.pendingOffer = offer
    self.video = video
    self.isVideoEnabled = video
    self.iceServers = iceServers
    self.factory = factory
    self.signaling = signaling
    self.clock = clock
    self.policy = policy
    (states, stateContinuation) = AsyncStream<State>.makeStream(bufferingPolicy: .unbounded)
    stateContinuation.yield(.idle)
    (dataMessages, dataContinuation) = AsyncStream<Data>.makeStream(bufferingPolicy: .bufferingNewest(256))
    (requests, outbox) = AsyncStream<CallSignalingRequest>.makeStream(bufferingPolicy: .unbounded)
  }

  // MARK: Call control

  /// Caller: create the peer connection, offer and send the invite. Callee: create the peer
  /// connection and apply the invite's offer (the answer waits for `accept()`).
  public func start() async {
    guard state == .idle else { return }
    // The caller hears ringback as soon as this device alerts, not after the (slow) peer
    // connection is built.
    if role == .callee { send(.ringing(callId: callId)) }
    guard let pc = await installFreshPeerConnection() else { return }
    switch role {
    case .caller:
      setState(.calling)
      do {
        guard let offer = try await makeOffer(on: pc, iceRestart: false) else { return }
        send(.invite(callId: callId, to: remoteUserId ?? "", video: video, offer: offer))
      } catch {
        await end(.error("offer: \(error)"), notify: .cancel(callId: callId))
      }
    case .callee:
      setState(.incoming)
      if let offer = pendingOffer {
        pendingOffer = nil
        await applyRemote(offer, kind: .offer, on: pc)
      }
    }
  }

  /// Callee: answer (or, if the invite carried no offer, accept and wait for the offer).
  public func accept() async {
    guard role == .callee, state == .incoming, let pc else { return }
    setState(.connecting)
    guard remoteReady else {
      send(.accept(callId: callId, answer: nil))
      return
    }
    do {
      guard let answer = try await makeAnswer(on: pc) else { return }
      send(.accept(callId: callId, answer: answer))
    } catch {
      await end(.error("answer: \(error)"), notify: .decline(callId: callId))
    }
  }

  /// Hang up: cancel (caller, before accept), decline (callee, before accept) or hangup.
  public func hangup() async {
    let request: CallSignalingRequest
    switch state {
    case .ended: return
    case .idle, .calling, .ringing: request = .cancel(callId: callId)
    case .incoming: request = .decline(callId: callId)
    case .connecting, .connected, .reconnecting: request = .hangup(callId: callId)
    }
    await end(.local, notify: request)
  }

  public func setMuted(_ muted: Bool) async {
    isMuted = muted
    await pc?.setAudioEnabled(!isMuted && !isOnHold)
  }

  /// Hold: the microphone is off while held (the call and its connection stay up).
  public func setOnHold(_ held: Bool) async {
    isOnHold = held
    await pc?.setAudioEnabled(!isMuted && !isOnHold)
  }

  public func setVideoEnabled(_ enabled: Bool) async {
    isVideoEnabled = enabled
    await pc?.setVideoEnabled(enabled)
  }

  public func stats() async -> PeerConnectionStats? {
    await pc?.stats()
  }

  public func sendData(_ data: Data) async throws {
    guard let pc, !isEnded else { throw CallEngineError.notActive }
    try await pc.sendData(data)
  }

  // MARK: Server messages

  /// Feeds one server message; messages for other calls are ignored.
  public func handle(_ message: ServerMessage) async {
    guard !isEnded, message.callId == callId else { return }
    switch message {
    case .ringing:
      if role == .caller, state == .calling { setState(.ringing) }
    case .accept(let m):
      guard role == .caller, state == .calling || state == .ringing, let pc else { return }
      remotePeer = m.from
      setState(.connecting)
      if let answer = m.answer { await applyRemote(answer, kind: .answer, on: pc) }
    case .answer(let m):
      guard role == .caller, let pc else { return }
      await applyRemote(SessionDescription(sdp: m.sdp), kind: .answer, on: pc)
    case .offer(let m):
      guard role == .callee else { return }
      await handleOffer(SessionDescription(sdp: m.sdp), iceRestart: m.iceRestart)
    case .candidate(let m):
      await addRemoteCandidate(m.candidate)
    case .iceRestartRequest:
      guard role == .caller, restartAttempt == 0, state != .idle else { return }
      cancelTimer()
      await restart(attempt: 1)
    case .callEnded(let m):
      if m.reason == .glare, let survivor = m.replacedBy, role == .caller {
        await end(.glare(replacedBy: survivor), notify: nil)
      } else {
        await end(.remote(m.reason), notify: nil)
      }
    case .error(let m):
      if state == .calling { await end(.error("server: \(m.code)"), notify: nil) }
    case .endOfCandidates, .invite, .welcome, .ack, .unknown:
      break
    }
  }

  // MARK: Negotiation

  private func handleOffer(_ offer: SessionDescription, iceRestart: Bool) async {
    guard var pc else { return }
    if iceRestart && !pc.canRestartIce {
      // The answerer MAY answer from a fresh peer connection (protocol 9, ICE restart).
      guard let fresh = await installFreshPeerConnection() else { return }
      pc = fresh
    } else if iceRestart {
      remoteReady = false
      resetGathering()
    }
    await applyRemote(offer, kind: .offer, on: pc)
    guard isCurrent(pc), remoteReady, state != .incoming else { return }
    do {
      guard let answer = try await makeAnswer(on: pc) else { return }
      send(.answer(callId: callId, sdp: answer.sdp))
    } catch {
      await end(.error("answer: \(error)"), notify: .hangup(callId: callId))
    }
  }

  /// createOffer and setLocalDescription (and, without trickle, gathering); nil when the
  /// connection was replaced or the call ended meanwhile.
  private func makeOffer(on pc: any PeerConnection, iceRestart: Bool) async throws -> SessionDescription? {
    let offer = try await pc.createOffer(iceRestart: iceRestart)
    guard isCurrent(pc) else { return nil }
    resetGathering()  // a restart gathers a new generation
    try await pc.setLocalDescription(offer, kind: .offer)
    guard isCurrent(pc) else { return nil }
    remoteReady = false  // remote candidates of this generation wait for the answer
    let complete = await withGatheredCandidates(offer)
    return isCurrent(pc) ? complete : nil
  }

  /// createAnswer and setLocalDescription (and, without trickle, gathering); nil when the
  /// connection was replaced or the call ended meanwhile.
  private func makeAnswer(on pc: any PeerConnection) async throws -> SessionDescription? {
    let answer = try await pc.createAnswer()
    guard isCurrent(pc) else { return nil }
    try await pc.setLocalDescription(answer, kind: .answer)
    guard isCurrent(pc) else { return nil }
    let complete = await withGatheredCandidates(answer)
    return isCurrent(pc) ? complete : nil
  }

  /// setRemoteDescription, then the buffered candidates in arrival order. Candidates that
  /// arrive during the flush join the buffer, so order is kept.
  private func applyRemote(_ description: SessionDescription, kind: SessionDescriptionKind, on pc: any PeerConnection)
    async
  {
    remoteReady = false
    do {
      try await pc.setRemoteDescription(description, kind: kind)
    } catch {
      guard isCurrent(pc) else { return }
      await end(
        .error("remote description: \(error)"),
        notify: role == .caller ? .hangup(callId: callId) : .decline(callId: callId))
      return
    }
    while isCurrent(pc), !pendingRemoteCandidates.isEmpty {
      let candidate = pendingRemoteCandidates.removeFirst()
      try? await pc.addRemoteCandidate(candidate)
    }
    if isCurrent(pc) { remoteReady = true }
  }

  private func addRemoteCandidate(_ candidate: IceCandidate) async {
    guard let pc, remoteReady else {
      pendingRemoteCandidates.append(candidate)
      return
    }
    try? await pc.addRemoteCandidate(candidate)
  }

  // MARK: ICE policy

  private func connectionStateChanged(_ newState: PeerConnectionState, generation gen: Int) async {
    guard gen == generation, !isEnded else { return }
    switch newState {
    case .new, .checking, .closed:
      break
    case .connected:
      cancelTimer()
      restartAttempt = 0
      setState(.connected)
    case .disconnected:
      guard isNegotiated, restartAttempt == 0, timer == nil else { return }  // a running restart has its own timeout
      setState(.reconnecting(attempt: 0))
      schedule(after: policy.disconnectedGrace) { engine in await engine.restart(attempt: 1) }
    case .failed:
      guard isNegotiated else { return }
      cancelTimer()
      await restartFailedOrBegin()
    }
  }

  /// `failed` with no restart in flight restarts at once; a failed restart k is retried after
  /// `retryBackoff[k-1]`; when the last retry fails, the call ends.
  private func restartFailedOrBegin() async {
    let k = restartAttempt
    if k == 0 {
      await restart(attempt: 1)
    } else if k > policy.retryBackoff.count {
      await end(.iceFailed, notify: .hangup(callId: callId))
    } else {
      schedule(after: policy.retryBackoff[k - 1]) { engine in await engine.restart(attempt: k + 1) }
    }
  }

  private func restart(attempt k: Int) async {
    guard !isEnded else { return }
    restartAttempt = k
    setState(.reconnecting(attempt: k))
    schedule(after: policy.attemptTimeout) { engine in await engine.restartFailedOrBegin() }
    switch role {
    case .callee:
      // The answerer never restarts itself: it asks the offerer.
      send(.iceRestartRequest(callId: callId))
    case .caller:
      guard var pc else { return }
      var fresh = false
      if !pc.canRestartIce {
        guard let made = await installFreshPeerConnection() else { return }
        pc = made
        fresh = true
      }
      do {
        guard let offer = try await makeOffer(on: pc, iceRestart: !fresh) else { return }
        send(.offer(callId: callId, sdp: offer.sdp, iceRestart: true))
      } catch {
        guard isCurrent(pc) else { return }
        await end(.error("restart offer: \(error)"), notify: .hangup(callId: callId))
      }
    }
  }

  private func schedule(after seconds: Double, _ action: @escaping @Sendable (CallEngine) async -> Void) {
    timer?.cancel()
    timerToken += 1
    let token = timerToken
    timer = Task { [weak self, clock] in
      do { try await clock.sleep(for: seconds) } catch { return }
      await self?.timerFired(token: token, action)
    }
  }

  private func timerFired(token: Int, _ action: @Sendable (CallEngine) async -> Void) async {
    guard token == timerToken, !isEnded else { return }
    timer = nil
    await action(self)
  }

  private func cancelTimer() {
    timer?.cancel()
    timer = nil
    timerToken += 1
  }

  // MARK: Peer connection lifecycle

  /// Detaches and closes the current peer connection (if any), then makes, attaches and
  /// configures a fresh one. Returns nil (and ends the call) if the factory fails.
  private func installFreshPeerConnection() async -> (any PeerConnection)? {
    // Candidates buffered before the first connection exists (a callee's early trickle) are
    // kept; those of a replaced connection are stale.
    let replacing = pc != nil
    await detachAndClose()
    let made: any PeerConnection
    do {
      made = try await factory.makePeerConnection(
        PeerConnectionConfiguration(
          iceServers: iceServers, video: video,
          dataChannel: policy.dataChannel))
    } catch {
      await end(.error("peer connection: \(error)"), notify: cancelOrHangup())
      return nil
    }
    guard !isEnded else {
      await made.close()
      return nil
    }
    pc = made
    remoteReady = false
    resetGathering()
    if replacing { pendingRemoteCandidates.removeAll() }
    let gen = generation
    let candidatesID = nextListenerID + 1
    let statesID = nextListenerID + 2
    let dataID = nextListenerID + 3
    nextListenerID += 3
    listeners = [
      (
        candidatesID,
        Task { [weak self] in
          await EngineListener.$id.withValue(candidatesID) {
            for await candidate in made.localCandidates {
              await self?.localCandidate(candidate, generation: gen)
            }
          }
        }
      ),
      (
        statesID,
        Task { [weak self] in
          await EngineListener.$id.withValue(statesID) {
            for await s in made.connectionStates {
              await self?.connectionStateChanged(s, generation: gen)
            }
          }
        }
      ),
      (
        dataID,
        Task { [weak self] in
          await EngineListener.$id.withValue(dataID) {
            for await data in made.dataChannelMessages {
              await self?.dataReceived(data, generation: gen)
            }
          }
        }
      ),
    ]
    await made.setAudioEnabled(!isMuted && !isOnHold)
    await made.setVideoEnabled(isVideoEnabled)
    return made
  }

  private func dataReceived(_ data: Data, generation gen: Int) {
    guard gen == generation, !isEnded else { return }
    dataContinuation.yield(data)
  }

  private func localCandidate(_ candidate: IceCandidate?, generation gen: Int) {
    guard gen == generation, !isEnded else { return }
    guard policy.trickle else {
      if let candidate { gathered.append(candidate) } else { finishGathering() }
      return
    }
    if let candidate {
      send(.candidate(callId: callId, candidate: candidate))
    } else {
      send(.endOfCandidates(callId: callId))
    }
  }

  /// Teardown order: drop every event of this connection (generation bump), stop listening and
  /// wait until the listeners are gone, and only then close it. When the teardown was caused by
  /// one of the listeners' own events (ICE `failed`), that listener cannot be awaited (it is
  /// running this code): it is cancelled, its events are dropped by the generation check, and
  /// its loop ends as soon as this handler returns.
  private func detachAndClose() async {
    generation += 1
    let old = pc
    pc = nil
    let tasks = listeners
    listeners = []
    for listener in tasks { listener.task.cancel() }
    let current = EngineListener.id
    for listener in tasks where listener.id != current { await listener.task.value }
    await old?.close()
  }

  private func end(_ ending: Ending, notify request: CallSignalingRequest?) async {
    guard !isEnded else { return }
    setState(.ended(ending))
    cancelTimer()
    finishGathering()
    if let request { send(request) }
    outbox.finish()  // queued requests (e.g. the hangup) still go out, in order
    await detachAndClose()
    pendingRemoteCandidates.removeAll()
    dataContinuation.finish()
    stateContinuation.finish()
  }

  private func cancelOrHangup() -> CallSignalingRequest {
    switch state {
    case .incoming: return .decline(callId: callId)
    case .idle, .calling, .ringing: return role == .caller ? .cancel(callId: callId) : .decline(callId: callId)
    default: return .hangup(callId: callId)
    }
  }

  // MARK: Without trickle

  /// With trickle, the description as it is. Without, the description once gathering is
  /// complete (or timed out), with every gathered candidate written into it.
  private func withGatheredCandidates(_ description: SessionDescription) async -> SessionDescription {
    guard !policy.trickle else { return description }
    if !gatheringDone {
      let timeout = Task { [weak self, clock, policy] in
        do { try await clock.sleep(for: policy.gatheringTimeout) } catch { return }
        await self?.finishGathering()
      }
      await withCheckedContinuation { gatheringWaiters.append($0) }
      timeout.cancel()
    }
    return SessionDescription(sdp: SDPCandidates.embedding(gathered, in: description.sdp))
  }

  private func resetGathering() {
    gathered = []
    gatheringDone = false
  }

  private func finishGathering() {
    gatheringDone = true
    let waiters = gatheringWaiters
    gatheringWaiters = []
    for waiter in waiters { waiter.resume() }
  }

  // MARK: Helpers

  /// Accepted: ICE events drive the restart policy only from here on.
  private var isNegotiated: Bool {
    switch state {
    case .connecting, .connected, .reconnecting: return true
    case .idle, .calling, .ringing, .incoming, .ended: return false
    }
  }

  private var isEnded: Bool {
    if case .ended = state { return true }
    return false
  }

  private func isCurrent(_ candidate: any PeerConnection) -> Bool {
    guard !isEnded, let pc else { return false }
    return pc === candidate
  }

  private func setState(_ new: State) {
    guard !isEnded, new != state else { return }
    state = new
    stateContinuation.yield(new)
  }

  private func send(_ request: CallSignalingRequest) {
    if senderTask == nil {
      // One sender, in order: an offer always leaves before the candidates gathered after it.
      senderTask = Task { [weak self, signaling, requests] in
        for await request in requests {
          do {
            try await signaling.send(request)
          } catch {
            switch request {
            case .invite, .accept: await self?.end(.error("signaling: \(error)"), notify: nil)
            default: break  // delivery is at-least-once; a lost socket resumes
            }
          }
        }
      }
    }
    outbox.yield(request)
  }

  /// Waits until every request queued so far has been handed to `CallSignaling` (after the
  /// call ended). Useful for tests and for apps that want the hangup out before suspending.
  public func drainSignaling() async {
    await senderTask?.value
  }
}

/// Marks the tasks that listen to a peer connection's streams.
private enum EngineListener {
  @TaskLocal static var id: Int?
}

public enum CallEngineError: Error, Sendable, Equatable {
  case notActive
}
