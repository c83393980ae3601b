import DialtoneProtocol
import DialtoneSupport
import Foundation

/// A device's calling endpoint: one signaling connection, the ICE-server cache, and a
/// `CallEngine` per call. It routes each server message to its call, turns invites into
/// ringing engines, applies the glare rule (the device whose outgoing call lost answers the
/// survivor), accepts calls answered before their invite arrived (woken by a push), and after
/// a resync asks the server how its calls stand. It holds no media or UI: apps and the CLI
/// observe `events` and each engine's `states`.
public actor CallClient {
  public struct Configuration: Sendable {
    /// How each call negotiates. `policy.preconnect` applies only while the server agreed to
    /// `preconnect` in its latest `welcome`.
    public var policy: CallEngine.Policy = .init()
    /// Accept the surviving call after glare at once (protocol.md section 9). An app that
    /// answers through CallKit sets this to false and answers on `.glare` itself.
    public var acceptGlareSurvivor = true
    /// How long `stop()` waits for the server to answer the hangups and leaves it sent, so
    /// the other side hears of them even across a congested link (its TCP retransmits; a
    /// socket that answers nothing meanwhile is replaced, `SignalingClient.Configuration.drainStall`).
    public var stopGrace: Duration = .seconds(5)
    /// Where the calls' logs go (each engine's state changes, incoming calls, glare); give the
    /// `SignalingClient` the same log.
    public var log: Log = .silent
    /// Group calls through Janus: ask to receive everyone on one subscriber connection
    /// (`multistream`, protocol.md 20.9) instead of one connection per participant: on by
    /// default (two connections per device whatever the call's size). The engine must take
    /// remote offers that add, deactivate and reuse m-sections and tell remote streams apart by
    /// the SSRCs each offer names (libwebrtc does; so does this package's GStreamer engine).
    /// `false` asks for one connection per participant, as does a server that does not grant
    /// it (an older one).
    public var groupMultistream = true

    public init() {}
  }

  public enum Event: Sendable {
    case connected(ServerMessage.Welcome)
    /// The socket dropped; signaling is reconnecting (media keeps flowing meanwhile).
    case disconnected
    /// Signaling stopped for good (token refused, replaced, `stop()`); every call was ended.
    case stopped(reason: String)
    /// A call rings this device: its engine has applied the offer and sent `ringing`.
    /// Answer with `answer(_:)` (or `engine.accept()`), decline with `end(_:)`.
    case incoming(CallEngine)
    /// Glare: this device's outgoing call `replaced` lost to the peer's call `survivor`.
    case glare(replaced: CallID, survivor: CallID)
    /// The server's state of a call asked for with `resolve(_:)` (nil: unknown to the server).
    case resolved(CallID, CallState?)
    /// A group call rings this device: `group.join()` to answer, `group.decline()` to refuse.
    case groupIncoming(GroupCall)
    /// The server's state of a group call asked for with `resolveGroup(_:)` (nil: unknown to the
    /// server, or not this user's), and this user's id (nil before the first `welcome`).
    case groupResolved(CallID, GroupCallState?, userId: String?)
  }

  public nonisolated let events: AsyncStream<Event>
  public nonisolated let signaling: SignalingClient
  public nonisolated let iceServers: IceServerCache
  private let eventSink: AsyncStream<Event>.Continuation
  private let factory: any PeerConnectionFactory
  private let clock: any DialtoneClock
  private let configuration: Configuration

  private var engines: [CallID: CallEngine] = [:]
  /// Calls forgotten while their ending still runs (connections closing): `stop()` waits for
  /// them, so that a process that quits after a call closes its connections first.
  private var retiring: [CallID: CallEngine] = [:]
  private var groups: [CallID: GroupCall] = [:]
  /// Group messages for a call not registered yet (a room's call, whose id comes with the
  /// `room-join` answer): replayed when it is. Bounded.
  private var unroutedGroupMessages: [ServerMessage] = []
  private static let maxUnroutedGroupMessages = 64
  /// Answered before their invite arrived (a push woke the app, the user tapped answer).
  private var answerOnInvite: Set<CallID> = []
  private var deviceId: String?
  private var pump: Task<Void, Never>?

  public init(
    signaling: SignalingClient, iceServers: IceServerCache, factory: any PeerConnectionFactory,
    clock: any DialtoneClock = SystemClock(), configuration: Configuration = .init()
  ) {
    self.signaling = signaling
    self.iceServers = iceServers
    self.factory = factory
    self.clock = clock
    self.configuration = configuration
    (events, eventSink) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
  }

  /// Pre-warms the ICE servers and connects signaling; idempotent.
  public func start() async {
    guard pump == nil else { return }
    let events = signaling.events
    pump = Task { [weak self] in
      for await event in events { await self?.process(event) }
    }
    await iceServers.prewarm()
    await signaling.start()
  }

  /// Ends every call and disconnects.
  public func stop() async {
    for group in groups.values { await group.leave() }
    groups.removeAll()
    for engine in engines.values { await engine.hangup() }
    for engine in engines.values { await engine.drainSignaling() }
    engines.removeAll()
    for engine in retiring.values {
      await engine.settle()
      // Its last requests (the final quality report) are handed to signaling before the drain.
      await engine.drainSignaling()
    }
    await signaling.stop(draining: configuration.stopGrace)
    await iceServers.stop()
    pump?.cancel()
    pump = nil
    eventSink.finish()
  }

  /// The network changed: reconnect signaling now. 1:1 engines recover media themselves (their
  /// connection states); group calls restart every connection to the SFU at once (one host:
  /// they all lost their path, and a send-only publisher may see nothing of it).
  public func networkChanged() async {
    await signaling.networkChanged()
    for group in groups.values { await group.networkChanged() }
  }

  // MARK: Calls

  /// Starts an outgoing call. Dialing never waits for the network: the ICE servers come from
  /// the cache (or its defaults), and the invite is queued if signaling is still connecting.
  public func dial(_ userId: String, video: Bool = false, callId: CallID = CallIDRules.generate()) async -> CallEngine {
    await prune()
    let engine = CallEngine(
      outgoingCallId: callId, to: userId, video: video, iceServers: await iceServers.current(),
      factory: factory, signaling: channel, clock: clock, policy: await callPolicy(), log: configuration.log)
    engines[callId] = engine
    await engine.start()
    return engine
  }

  /// Answers a ringing call, or remembers to answer it when its invite arrives.
  public func answer(_ callId: CallID) async {
    if let engine = engines[callId] {
      await engine.accept()
    } else {
      answerOnInvite.insert(callId)
    }
  }

  /// Ends a call this device knows: cancel, decline or hang up as its state says. A call known
  /// only from a push (no invite yet) is declined over signaling.
  public func end(_ callId: CallID) async {
    answerOnInvite.remove(callId)
    if let engine = engines.removeValue(forKey: callId) {
      await retire(engine) { await $0.hangup() }
    } else {
      _ = try? await signaling.submit(.decline(.init(callId: callId)))
    }
  }

  public func engine(for callId: CallID) -> CallEngine? {
    engines[callId]
  }

  // MARK: Group calls

  /// Starts a group call and rings `members`; this device joins it at once.
  public func createGroup(
    members: [String], video: Bool = false, title: String? = nil, callId: CallID = CallIDRules.generate()
  ) async -> GroupCall {
    let group = await makeGroup(callId, entry: .create(members: members, title: title), video: video)
    await group.start()
    return group
  }

  /// Joins a group call this user is a member of (a ring missed or ignored, or after leaving).
  public func joinGroup(_ callId: CallID, video: Bool = false) async -> GroupCall {
    if let existing = groups[callId], await existing.state == .ringing {
      await existing.join()
      return existing
    }
    let group = await makeGroup(callId, entry: .join, video: video)
    await group.start()
    return group
  }

  /// Joins the live call of an app-defined room, or starts it with `callId`. Nobody rings. The
  /// returned call has the room's live call id, which may differ from `callId`.
  public func joinRoom(_ name: String, video: Bool = false, callId: CallID = CallIDRules.generate()) async throws
    -> GroupCall
  {
    let reply = try await signaling.request(
      .roomJoin(.init(room: name, callId: callId, video: video, multistream: configuration.groupMultistream)))
    switch reply.routed {
    case .session(.ack(let ack)):
      guard let state = ack.group else { throw GroupCallError.unexpectedAnswer("room-join ack without group") }
      let group = await makeGroup(state.callId, entry: .joinedRoom(state), video: state.video)
      await group.start()
      return group
    case .session(.error(let error)):
      throw GroupCallError.refused(error.code, error.message)
    case .session(.welcome), .oneToOne, .group, .unknown:
      throw GroupCallError.unexpectedAnswer(reply.typeName)
    }
  }

  public func group(for callId: CallID) -> GroupCall? { groups[callId] }

  /// Declines a group ring for every device of this user. A ring known only from a push (its
  /// `group-invite` not here yet) is declined over signaling.
  public func declineGroup(_ callId: CallID) async {
    if let group = groups[callId] {
      await group.decline()
    } else {
      _ = try? await signaling.submit(.groupDecline(.init(callId: callId)))
    }
  }

  /// Asks the server for a group call's state (`get-group`), as `resolve(_:)` does for a 1:1
  /// call; the answer arrives as `.groupResolved`. A device woken by a group push learns this
  /// way that the ring was cancelled, answered or declined elsewhere, or missed meanwhile.
  public func resolveGroup(_ callId: CallID) {
    let client = signaling
    Task {
      let state: GroupCallState?
      do {
        let reply = try await client.request(.getGroup(.init(callId: callId)))
        if case .ack(let ack) = reply { state = ack.group } else { state = nil }
      } catch {
        return  // stopped: every call ends anyway
      }
      // Known by now: the answer came on a connection that was welcomed first.
      let userId = await client.userId
      self.eventSink.yield(.groupResolved(callId, state, userId: userId))
    }
  }

  private func makeGroup(_ callId: CallID, entry: GroupCall.Entry, video: Bool) async -> GroupCall {
    let servers = await iceServers.current()
    let group = GroupCall(
      callId: callId, entry: entry, video: video, iceServers: servers, factory: factory,
      signaling: SignalingGroupChannel(client: signaling), multistream: configuration.groupMultistream,
      clock: clock, recovery: configuration.policy.recovery)
    groups[callId] = group
    let replay = unroutedGroupMessages.filter { $0.callId == callId }
    unroutedGroupMessages.removeAll { $0.callId == callId }
    for message in replay { group.receive(message) }
    return group
  }

  private func routeGroup(_ message: ServerMessage, _ kind: ServerMessage.GroupMessage) async {
    guard let callId = message.callId else { return }
    if case .groupInvite(let invite) = kind {
      await pruneGroups()
      guard groups[callId] == nil else { return }  // re-delivered, or already joined
      let group = await makeGroup(callId, entry: .invited(invite), video: invite.video)
      await group.start()
      eventSink.yield(.groupIncoming(group))
      return
    }
    guard let group = groups[callId] else {
      unroutedGroupMessages.append(message)
      if unroutedGroupMessages.count > Self.maxUnroutedGroupMessages { unroutedGroupMessages.removeFirst() }
      return
    }
    group.receive(message)
    if case .groupEnded = kind { groups[callId] = nil }
  }

  /// The calls still in progress on this device.
  public func activeCalls() async -> [CallEngine] {
    await prune()
    return Array(engines.values)
  }

  /// Asks the server for a call's state (`get-call`); the answer arrives as `.resolved`, and a
  /// call that is over on the server ends here too.
  public func resolve(_ callId: CallID) {
    let client = signaling
    Task {
      let state: CallState?
      do {
        let reply = try await client.request(.getCall(.init(callId: callId)))
        if case .ack(let ack) = reply { state = ack.call } else { state = nil }
      } catch {
        return  // stopped: every call ends anyway
      }
      await self.resolved(callId, state: state)
    }
  }

  // MARK: Signaling events

  private func process(_ event: SignalingClient.Event) async {
    switch event {
    case .connected(let welcome):
      deviceId = welcome.deviceId
      if !welcome.iceServers.isEmpty {
        await iceServers.update(servers: welcome.iceServers, ttl: welcome.iceServersTtl)
      }
      eventSink.yield(.connected(welcome))
    case .disconnected:
      eventSink.yield(.disconnected)
    case .resynced:
      // Nothing of the old session will be replayed: ask how each call stands.
      await prune()
      for callId in engines.keys { resolve(callId) }
    case .message(let message):
      await route(message)
    case .stopped(let reason):
      for engine in engines.values { await engine.hangup() }
      engines.removeAll()
      answerOnInvite.removeAll()
      eventSink.yield(.stopped(reason: reason))
    }
  }

  /// Each message goes to the desk its type names (`ServerMessageType.rules`): a group call's to
  /// its `GroupCall`, a 1:1 call's to its engine.
  private func route(_ message: ServerMessage) async {
    switch message.routed {
    case .group(let group):
      await routeGroup(message, group)
    case .oneToOne(.invite(let invite)):
      await ring(invite)
    case .oneToOne(.callEnded(let ended)):
      answerOnInvite.remove(ended.callId)
      guard let engine = engines.removeValue(forKey: ended.callId) else { return }  // not ours
      await retire(engine) { await $0.handle(message) }
      if ended.reason == .glare, engine.role == .caller, let survivor = ended.replacedBy {
        configuration.log.scoped("call").info("glare: this outgoing call lost to \(survivor)", callId: ended.callId)
        eventSink.yield(.glare(replaced: ended.callId, survivor: survivor))
        if configuration.acceptGlareSurvivor { await answer(survivor) }
      }
    case .oneToOne, .session(.error):
      // Answers to requests reach their callers; an error with no request of ours is its call's.
      if let callId = message.callId, let engine = engines[callId] { await engine.handle(message) }
    case .session(.welcome), .session(.ack), .unknown:
      return  // the signaling client's business; a type this library does not know is ignored
    }
  }

  /// The policy of a new call: pre-connect only with a server that agreed to it (a call
  /// dialled before the first `welcome` goes without).
  private func callPolicy() async -> CallEngine.Policy {
    var policy = configuration.policy
    let agreed = await signaling.agreedFeatures
    policy.preconnect = policy.preconnect && agreed.contains(ProtocolFeature.preconnect)
    return policy
  }

  private func ring(_ invite: ServerMessage.Invite) async {
    await prune()
    guard engines[invite.callId] == nil else { return }  // a re-delivered invite
    var policy = await callPolicy()
    // Answered before it rang here (from a push): no leg to ask for, the accept follows at once.
    if answerOnInvite.contains(invite.callId) { policy.preconnect = false }
    let engine = CallEngine(
      incoming: invite, iceServers: await iceServers.current(), factory: factory,
      signaling: channel, clock: clock, policy: policy, log: configuration.log)
    engines[invite.callId] = engine
    await engine.start()
    eventSink.yield(.incoming(engine))
    if answerOnInvite.remove(invite.callId) != nil { await engine.accept() }
  }

  private func resolved(_ callId: CallID, state: CallState?) async {
    eventSink.yield(.resolved(callId, state))
    guard let engine = engines[callId] else { return }
    let reason: EndReason?
    switch state?.state {
    case nil: reason = .connectionLost
    case .ended: reason = state?.endReason ?? .connectionLost
    case .accepted:
      // Accepted by another device of ours while this one was away.
      let elsewhere = engine.role == .callee && state?.calleeDeviceId != nil && state?.calleeDeviceId != deviceId
      reason = elsewhere ? .answeredElsewhere : nil
    case .ringing: reason = nil
    }
    guard let reason else { return }
    engines[callId] = nil
    await retire(engine) { await $0.handle(.callEnded(.init(callId: callId, reason: reason))) }
  }

  /// Runs the event that ends a forgotten call (it returns once its effects ran), keeping the
  /// call in `retiring` meanwhile.
  private func retire(_ engine: CallEngine, _ ending: (CallEngine) async -> Void) async {
    retiring[engine.callId] = engine
    await ending(engine)
    retiring[engine.callId] = nil
  }

  private func rejected(_ error: ServerMessage.ErrorMessage) async {
    guard let callId = error.callId, let engine = engines[callId] else { return }
    await engine.handle(.error(error))
  }

  // MARK: Helpers

  private nonisolated var channel: SignalingCallChannel {
    SignalingCallChannel(client: signaling) { [weak self] error in await self?.rejected(error) }
  }

  /// Forgets group calls that ended (left here, or ended by the server).
  private func pruneGroups() async {
    for (callId, group) in groups {
      if case .ended = await group.state { groups[callId] = nil }
    }
  }

  /// Forgets calls that ended (hung up locally, ICE failed, ...).
  private func prune() async {
    for (callId, engine) in engines {
      if case .ended = await engine.state { engines[callId] = nil }
    }
  }
}
