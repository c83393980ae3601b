import DialtoneProtocol
import Foundation

/// One call's negotiation as a pure value: `handle(_:)` takes an event (an app action, a server
/// message, a peer-connection result or callback, a timer) and returns the effects to run, in
/// order. `CallEngine` runs the effects and feeds their results back as events.
///
/// Peer connections are named by generation: every effect and result carries the generation it
/// is for, and results of a connection that was replaced or closed are ignored here, so no
/// stale callback can touch a call.
public struct CallEngineMachine: Sendable {
  public enum Event: Sendable, Equatable {
    case start
    case accept
    case hangup
    case setMuted(Bool)
    case setOnHold(Bool)
    case setVideoEnabled(Bool)
    /// Send video or stop (an audio call upgraded to video and back), by renegotiation.
    case setSendsVideo(Bool)
    case server(ServerMessage)
    case connectionMade(generation: Int, canRestartIce: Bool)
    case connectionFailed(generation: Int, String)
    case offerCreated(generation: Int, SessionDescription)
    case answerCreated(generation: Int, SessionDescription)
    case localDescriptionSet(generation: Int)
    case remoteDescriptionSet(generation: Int)
    /// `createOffer`, `createAnswer` or `setLocalDescription` threw.
    case localDescriptionFailed(generation: Int, String)
    case remoteDescriptionFailed(generation: Int, String)
    case localCandidate(generation: Int, IceCandidate?)
    case connectionState(generation: Int, PeerConnectionState)
    case timerFired(Timer)
    /// `invite` or `accept` could not be handed to signaling.
    case signalingFailed(String)
  }

  public enum Effect: Sendable, Equatable {
    /// Detach and close the current connection (if any), then make one for `generation`; its
    /// outcome comes back as `.connectionMade` or `.connectionFailed`.
    case replaceConnection(generation: Int)
    /// Make a pre-connected leg's connection (9b) beside the current one, its media held,
    /// gathering what the policy allows (a callee's private leg: relay only); its outcome comes
    /// back as `.connectionMade` or `.connectionFailed` of `generation`.
    case makeLeg(generation: Int, IceTransportPolicy)
    /// Detach and close a leg's connection.
    case closeLeg(generation: Int)
    /// The call goes on on this leg: detach and close the current connection, and make the
    /// leg's connection the current one (media still held until `releaseMedia`).
    case adoptLeg(generation: Int)
    /// Media may flow on this connection: the user answered (9b, no media before Answer).
    case releaseMedia(generation: Int)
    /// The connection may gather and use what `policy` allows from now on (a private leg the
    /// user answered on: every candidate).
    case setIceTransportPolicy(generation: Int, IceTransportPolicy)
    /// A leg's connection is up (caller: to this callee device; callee: "" for the caller's).
    case legConnected(device: String)
    case createOffer(generation: Int, iceRestart: Bool)
    case createAnswer(generation: Int)
    case setLocal(generation: Int, SessionDescription, SessionDescriptionKind)
    case setRemote(generation: Int, SessionDescription, SessionDescriptionKind)
    case addCandidate(generation: Int, IceCandidate)
    case setAudio(generation: Int, Bool)
    case setVideo(generation: Int, Bool)
    /// The video section's direction for the next offer or answer.
    case setVideoDirection(generation: Int, MediaDirection)
    case send(ClientMessage)
    /// The other side's camera went off or on (`media-state`): for the UI.
    case remoteCamera(Bool)
    /// The other side started or stopped sending video (its description's video direction).
    case remoteVideo(Bool)
    case arm(Timer, after: Duration)
    case cancel(Timer)
    /// The call is over: no request follows; detach and close the connection, finish the streams.
    case finish
  }

  public enum Timer: Hashable, Sendable {
    /// The ICE policy's one timer (disconnected grace, restart backoff, restart timeout); the
    /// token tells a fired timer from one that was replaced.
    case policy(token: Int)
    /// Without trickle: the longest wait for gathering.
    case gathering(generation: Int)
  }

  /// What a local description is for, once it is set (and, without trickle, gathered).
  enum Purpose: Sendable, Equatable {
    /// Caller: the first offer, sent in the `invite`.
    case invite
    /// Caller: an ICE-restart offer (on the same or a fresh connection).
    case restartOffer
    /// Callee: the answer sent in `accept`.
    case accept
    /// Either side: the answer to a later offer.
    case answer
    /// Either side, once connected: an offer changing what we send (video), sent before it is
    /// set locally (see `Renegotiation`).
    case renegotiate
    /// Our renegotiation offer, set locally once its answer arrived.
    case renegotiated
  }

  /// A renegotiation of ours (protocol.md 9a). Its offer is set locally only when the answer
  /// arrives: until then nothing changed in the connection, so in glare the callee can drop it
  /// without a rollback (which webrtcbin 1.22 lacks) and answer the caller's offer instead.
  enum Renegotiation: Sendable, Equatable {
    case making(sends: Bool)
    case offered(SessionDescription, sends: Bool)
    case applying(answer: SessionDescription, sends: Bool)
  }

  /// What to do once a remote description is applied.
  enum AfterRemote: Sendable, Equatable {
    case nothing
    /// Callee: answer it (unless still ringing; `accept` answers then).
    case answerIt
    /// Callee: accepted while the invite's offer was being applied: accept with the answer.
    case acceptIt
  }

  /// What the policy timer does when it fires.
  enum PolicyAction: Sendable, Equatable {
    case restart(attempt: Int)
    case restartFailedOrBegin
  }

  public let callId: CallID
  public let role: CallEngine.Role
  public let policy: CallEngine.Policy
  let remoteUserId: String?
  /// Placed or offered as a video call: every connection reserves a video transceiver.
  public let video: Bool

  public private(set) var state: CallEngine.State = .idle
  public private(set) var isMuted = false
  public private(set) var isOnHold = false
  public private(set) var isVideoEnabled = true
  /// Whether this side wants to send video (the call was placed or answered as a video call,
  /// or upgraded).
  public private(set) var sendsVideo: Bool
  /// Whether the other side sends video, from the direction of its latest description.
  public private(set) var remoteSendsVideo = false
  /// Whether the other side's latest description takes video (an answer cannot send otherwise).
  private var remoteReceivesVideo = true
  /// A video call for the UI: either side sends video.
  public var hasVideo: Bool { sendsVideo || remoteSendsVideo }
  public private(set) var remotePeer: Peer?
  /// The current peer connection's generation (0: none yet).
  public private(set) var generation = 0
  /// The last generation handed out, to the current connection or to a leg.
  private var lastGeneration = 0
  /// Pre-connect while ringing (9b): the legs, while the call rings.
  private var legs: PreconnectLegs
  /// The current generation's connection exists (it is being made until then).
  private var hasConnection = false
  private var canRestartIce = true
  /// Callee: the invite's offer, applied once the first connection exists.
  private var pendingOffer: SessionDescription?
  private var remoteReady = false
  /// The current connection is a pre-connected leg the call was accepted on (9b).
  private var onAdoptedLeg = false
  /// Callee: the invite's offer, kept for accepting on it if the server refuses the accept on
  /// our leg (9b: it lost the legs in a restart).
  private let inviteOffer: SessionDescription?
  /// Callee: the next connection's offer is answered inside an `accept`, not an `answer`.
  private var acceptOnNextOffer = false
  private var pendingRemoteCandidates: [IceCandidate] = []
  private var afterRemote: AfterRemote = .nothing
  /// The local description being made or set, and what it is for.
  private var local: (purpose: Purpose, description: SessionDescription?)?
  /// Without trickle: what was gathered, whether gathering ended, and a description waiting for it.
  private var gathered: [IceCandidate] = []
  private var gatheringDone = false
  private var waitingForGathering: (purpose: Purpose, description: SessionDescription)?
  /// What the latest offer or answer we made said about our video.
  private var negotiatedSendsVideo = false
  /// What the current connection's camera was last told (nil: nothing yet).
  private var cameraOpen: Bool?
  private var renegotiation: Renegotiation?
  /// An offer that arrived while our own renegotiation's answer was being applied.
  private var deferredOffer: SessionDescription?
  /// Caller: an ICE-restart offer went out and its answer has not come back.
  private var awaitingRestartAnswer = false
  /// Callee: it asked for a restart to change its video, and no offer came since.
  private var restartRequested = false
  /// The current connection completed an offer/answer exchange (later offers renegotiate).
  private var negotiatedOnce = false
  /// The remote description being applied (its video direction is read once it is set).
  private var remoteBeingApplied: SessionDescription?
  private var restartAttempt = 0
  private var policyTimer: (token: Int, action: PolicyAction)?
  private var nextTimerToken = 0

  /// Callee: it pre-connects only if the policy allows it and, for a private leg
  /// (`privatePreconnect`), a TURN server can relay it.
  private let relayAvailable: Bool

  /// - Parameter relayAvailable: a TURN server is among the call's ICE servers
  ///   (`PreconnectLegs.offersRelay`).
  public init(
    callId: CallID, role: CallEngine.Role, remoteUserId: String?, remotePeer: Peer?,
    offer: SessionDescription?, video: Bool, policy: CallEngine.Policy, relayAvailable: Bool = false
  ) {
    self.callId = callId
    self.role = role
    self.remoteUserId = remoteUserId
    self.remotePeer = remotePeer
    self.pendingOffer = offer
    self.inviteOffer = role == .callee ? offer : nil
    self.video = video
    self.sendsVideo = video
    self.policy = policy
    self.relayAvailable = relayAvailable
    legs = PreconnectLegs(
      role: role, callId: callId, relayOnly: role == .callee && policy.privatePreconnect)
  }

  /// Pre-connect is on for this call: the policy asks for it (the server agreed, and for a
  /// callee the invite offered it), with trickle. A callee whose leg would be private but has no
  /// TURN server to relay it asks for none: a relay-only leg without a relay never connects, and
  /// the call is negotiated after Answer instead.
  private var preconnects: Bool {
    policy.preconnect && policy.trickle && (role == .caller || !policy.privatePreconnect || relayAvailable)
  }

  public var isEnded: Bool {
    if case .ended = state { return true }
    return false
  }

  // MARK: Transitions

  public mutating func handle(_ event: Event) -> [Effect] {
    if isEnded { return [] }
    if let gen = event.generation, gen != generation, legs.owns(gen) {
      return legs.handle(event, sendsVideo: sendsVideo)
    }
    switch event {
    case .start:
      guard state == .idle else { return [] }
      // The caller hears ringback as soon as this device alerts, not after the (slow) peer
      // connection is built.
      let ringing = ClientMessage.ringing(.init(callId: callId, preconnect: preconnects))
      return (role == .callee ? [.send(ringing)] : []) + replaceConnection()
    case .accept:
      guard role == .callee, state == .incoming, hasConnection else { return [] }
      // The accept first: media follows it (9b).
      let accept = Effect.send(.accept(.init(callId: callId, answer: nil)))
      if legs.calleeLeg?.answered == true, let adopted = adoptLeg(device: nil) { return [accept] + adopted }
      let closed = legs.closeAll()
      state = .connecting
      return closed + acceptOnMainConnection()
    case .hangup:
      return hangupEffects()
    default:
      return handleOther(event)
    }
  }

  /// Callee, accepting on the connection of the invite's offer (today's flow).
  private mutating func acceptOnMainConnection() -> [Effect] {
    if remoteBeingApplied != nil {
      // The invite's offer is still being applied: the answer (and the accept) follow it.
      afterRemote = .acceptIt
      return []
    }
    guard remoteReady else { return [.send(.accept(.init(callId: callId, answer: nil)))] }
    return makeAnswer(.accept)
  }

  private mutating func hangupEffects() -> [Effect] {
    switch state {
    case .ended: return []
    case .idle, .calling, .ringing: return end(.local, notify: .cancel(.init(callId: callId)))
    case .incoming: return end(.local, notify: .decline(.init(callId: callId)))
    case .connecting, .connected, .reconnecting: return end(.local, notify: .hangup(.init(callId: callId)))
    }
  }

  private mutating func handleOther(_ event: Event) -> [Effect] {
    switch event {
    case .start, .accept, .hangup:
      return []
    case .setMuted(let muted):
      isMuted = muted
      return audioEffect()
    case .setOnHold(let held):
      isOnHold = held
      return audioEffect()
    case .setVideoEnabled(let enabled):
      let changed = isVideoEnabled != enabled
      isVideoEnabled = enabled
      var effects = cameraEffect()
      // The peer is told once the call is up (before that, the invite or accept says it).
      if changed, callIsUp {
        effects.append(.send(.mediaState(.init(callId: callId, camera: enabled))))
      }
      return effects
    case .setSendsVideo(let sends):
      guard sends != sendsVideo else { return [] }
      sendsVideo = sends
      // Stopping closes the camera at once; starting waits for the answer.
      return cameraEffect() + renegotiateIfNeeded()
    case .server(let message):
      return serverMessage(message)
    case .connectionMade(let gen, let restartable):
      guard gen == generation else { return [] }
      return connectionMade(restartable)
    case .connectionFailed(let gen, let why):
      guard gen == generation else { return [] }
      return end(.error("peer connection: \(why)"), notify: cancelOrHangup())
    case .offerCreated(let gen, let offer):
      guard gen == generation, let purpose = local?.purpose else { return [] }
      if purpose == .renegotiate, case .making(let sends) = renegotiation {
        local = nil
        renegotiation = .offered(offer, sends: sends)
        return [.send(.offer(.init(callId: callId, sdp: offer.sdp, iceRestart: false)))]
      }
      resetGathering()  // a restart gathers a new generation
      local = (purpose, offer)
      return [.setLocal(generation: gen, offer, .offer)]
    case .answerCreated(let gen, let answer):
      guard gen == generation, let purpose = local?.purpose else { return [] }
      local = (purpose, answer)
      return [.setLocal(generation: gen, answer, .answer)]
    case .localDescriptionSet(let gen):
      guard gen == generation, let (purpose, description) = local, let description else { return [] }
      local = nil
      if purpose == .renegotiated, case .applying(let answer, let sends) = renegotiation {
        renegotiation = nil
        negotiatedSendsVideo = sends
        return applyRemote(answer, .answer, then: .nothing) + cameraEffect()
      }
      if purpose == .invite || purpose == .restartOffer {
        remoteReady = false  // remote candidates of this generation wait for the answer
      }
      guard !policy.trickle else { return sendLocal(purpose, description) }
      if gatheringDone { return sendLocal(purpose, withGathered(description)) }
      waitingForGathering = (purpose, description)
      return [.arm(.gathering(generation: gen), after: policy.gatheringTimeout)]
    case .remoteDescriptionSet(let gen):
      guard gen == generation else { return [] }
      return remoteApplied()
    case .localDescriptionFailed(let gen, let why):
      guard gen == generation else { return [] }
      return localDescriptionFailed(why)
    case .remoteDescriptionFailed(let gen, let why):
      guard gen == generation else { return [] }
      return end(
        .error("remote description: \(why)"),
        notify: role == .caller ? .hangup(.init(callId: callId)) : .decline(.init(callId: callId)))
    case .localCandidate(let gen, let candidate):
      guard gen == generation else { return [] }
      return localCandidate(candidate)
    case .connectionState(let gen, let newState):
      guard gen == generation else { return [] }
      return connectionStateChanged(newState)
    case .timerFired(.gathering(let gen)):
      guard gen == generation else { return [] }
      return finishGathering()
    case .timerFired(.policy(let token)):
      guard let timer = policyTimer, timer.token == token else { return [] }
      policyTimer = nil
      switch timer.action {
      case .restart(let attempt): return restart(attempt: attempt)
      case .restartFailedOrBegin: return restartFailedOrBegin()
      }
    case .signalingFailed(let why):
      return end(.error("signaling: \(why)"), notify: nil)
    }
  }

  /// Accepted and not over: the peer's UI is there to be told.
  private var callIsUp: Bool {
    switch state {
    case .connecting, .connected, .reconnecting: return true
    default: return false
    }
  }

  private mutating func serverMessage(_ message: ServerMessage) -> [Effect] {
    guard message.callId == callId else { return [] }
    switch message {
    case .ringing(let m):
      guard role == .caller, state == .calling || state == .ringing else { return [] }
      state = .ringing
      guard m.preconnect, preconnects else { return [] }
      lastGeneration += 1
      return legs.requested(by: m.from.deviceId, generation: lastGeneration)
    case .accept(let m):
      guard role == .caller, state == .calling || state == .ringing, hasConnection else { return [] }
      remotePeer = m.from
      if m.preconnected, let adopted = adoptLeg(device: m.from.deviceId) { return adopted }
      let closed = legs.closeAll()
      state = .connecting
      guard let answer = m.answer else { return closed }
      negotiatedOnce = true
      return closed + applyRemote(answer, .answer, then: .nothing)
    case .answer(let m)
    where role == .caller && (state == .calling || state == .ringing) && legs.leg(forDevice: m.from.deviceId) != nil:
      // Before the accept: a pre-connected leg's early answer.
      return legs.answered(SessionDescription(sdp: m.sdp), by: m.from.deviceId)
    case .offer(let m) where m.leg:
      // After the accept a leg offer is moot: the call goes on on the invite's offer or on
      // the leg already adopted, never on a new one.
      guard role == .callee, state == .incoming, preconnects else { return [] }
      lastGeneration += 1
      return legs.offered(SessionDescription(sdp: m.sdp), generation: lastGeneration)
    case .candidate(let m) where m.leg:
      guard role == .callee else { return [] }
      if state == .incoming { return legs.remoteCandidate(m.candidate, device: nil) }
      // Still in flight when the call was accepted: the current connection's only if it is that leg.
      return onAdoptedLeg ? mainCandidate(m.candidate) : []
    case .candidate(let m)
    where role == .caller && (state == .calling || state == .ringing) && legs.leg(forDevice: m.from.deviceId) != nil:
      // A ringing callee device trickles on its leg.
      return legs.remoteCandidate(m.candidate, device: m.from.deviceId)
    case .answer(let m):
      guard hasConnection else { return [] }
      awaitingRestartAnswer = false
      if case .offered(let offer, let sends) = renegotiation {
        renegotiation = .applying(answer: SessionDescription(sdp: m.sdp), sends: sends)
        local = (.renegotiated, offer)
        return [.setLocal(generation: generation, offer, .offer)]
      }
      guard role == .caller else { return [] }
      negotiatedOnce = true
      return applyRemote(SessionDescription(sdp: m.sdp), .answer, then: .nothing)
    case .offer(let m):
      guard hasConnection else { return [] }
      let offer = SessionDescription(sdp: m.sdp)
      restartRequested = false
      if !m.iceRestart && !canRestartIce && negotiatedOnce {
        // webrtcbin cannot change a negotiated direction in place: the change is made again by
        // an ICE restart on fresh connections (ours as the caller, or the one we ask for).
        return renegotiateByRestart()
      }
      switch (role, renegotiation) {
      case (_, .applying?):
        // Our answer is being applied: theirs is the next negotiation.
        deferredOffer = offer
        return []
      case (.caller, .some):
        return []  // glare: the caller's offer wins, so the callee drops its own and answers ours
      case (.callee, .some):
        renegotiation = nil  // glare: ours was never applied; answer theirs, then offer again
        if local?.purpose == .renegotiate { local = nil }
      case (_, nil):
        break
      }
      if role == .caller {
        // The callee's renegotiation: answer it, unless an offer of ours (a restart) is out,
        // which the callee answers first (glare, as above).
        guard local == nil, !awaitingRestartAnswer, isNegotiated else { return [] }
        return applyRemote(offer, .offer, then: .answerIt)
      }
      if m.iceRestart && !canRestartIce {
        // The answerer MAY answer from a fresh peer connection (protocol.md 9, ICE restart).
        pendingOffer = offer
        return replaceConnection()
      }
      if m.iceRestart {
        remoteReady = false
        resetGathering()
      }
      return applyRemote(offer, .offer, then: .answerIt)
    case .candidate(let m):
      return mainCandidate(m.candidate)
    case .iceRestartRequest:
      guard role == .caller, restartAttempt == 0, state != .idle else { return [] }
      return cancelPolicyTimer() + restart(attempt: 1)
    case .callEnded(let m):
      if m.reason == .glare, let survivor = m.replacedBy, role == .caller {
        return end(.glare(replacedBy: survivor), notify: nil)
      }
      return end(.remote(m.reason), notify: nil)
    case .error(let m):
      // A callee on its adopted leg sent `accept` without an answer: an error is its refusal.
      if role == .callee, onAdoptedLeg {
        return acceptAgainOnTheInvitesOffer(m.code)
      }
      return state == .calling ? end(.error("server: \(m.code)"), notify: nil) : []
    case .mediaState(let m):
      return [.remoteCamera(m.camera)]
    case .endOfCandidates, .invite, .welcome, .ack, .unknown, .groupInvite, .groupUpdate, .groupMedia, .groupOffer,
      .groupAnswer, .groupCandidate, .groupStreamEnded, .groupEnded:
      return []
    }
  }

  /// The server refused our accept on the leg (only errors for `invite` and `accept` reach the
  /// engine): the call still rings there, so accept again on a fresh connection with the
  /// answer to the invite's offer (9b), as a device without a leg would.
  private mutating func acceptAgainOnTheInvitesOffer(_ code: ErrorCode) -> [Effect] {
    guard let offer = inviteOffer else { return end(.error("server: \(code)"), notify: nil) }
    pendingOffer = offer
    acceptOnNextOffer = true
    state = .connecting
    return replaceConnection()
  }

  private mutating func mainCandidate(_ candidate: IceCandidate) -> [Effect] {
    guard hasConnection, remoteReady else {
      pendingRemoteCandidates.append(candidate)
      return []
    }
    return [.addCandidate(generation: generation, candidate)]
  }

  // MARK: Pre-connect (9b)

  /// The call goes on on the leg of `device` (the callee's leg: nil), already negotiated: it
  /// becomes the current connection, its media released, and the others close. Nil when there
  /// is no such leg able to carry the call.
  private mutating func adoptLeg(device: String?) -> [Effect]? {
    guard let (leg, closed) = legs.adopt(device: device) else { return nil }
    var effects = closed + [.adoptLeg(generation: leg.generation)]
    generation = leg.generation
    onAdoptedLeg = true
    hasConnection = true
    canRestartIce = leg.canRestartIce
    remoteReady = leg.remoteReady
    pendingRemoteCandidates = leg.pendingRemote
    local = nil
    renegotiation = nil
    deferredOffer = nil
    remoteBeingApplied = nil
    afterRemote = .nothing
    awaitingRestartAnswer = false
    waitingForGathering = nil
    negotiatedOnce = true
    cameraOpen = nil
    if let direction = leg.remoteVideo {
      remoteReceivesVideo = direction.receives
      if direction.sends != remoteSendsVideo {
        remoteSendsVideo = direction.sends
        effects.append(.remoteVideo(direction.sends))
      }
    }
    negotiatedSendsVideo = sendsVideo && remoteReceivesVideo
    state = leg.connected ? .connected : .connecting
    effects += [.releaseMedia(generation: generation), .setAudio(generation: generation, !isMuted && !isOnHold)]
    // Answered: this device's addresses may now reach the caller, and a direct path may
    // replace the relay where the connection can change its policy in place.
    if leg.iceTransportPolicy == .relay { effects.append(.setIceTransportPolicy(generation: generation, .all)) }
    return effects + cameraEffect()
  }

  // MARK: Negotiation

  /// A new connection replaces the current one. Candidates buffered before the first one
  /// exists (a callee's early trickle) are kept; those of a replaced connection are stale.
  private mutating func replaceConnection() -> [Effect] {
    if generation > 0 { pendingRemoteCandidates.removeAll() }
    lastGeneration += 1
    generation = lastGeneration
    onAdoptedLeg = false
    hasConnection = false
    remoteReady = false
    local = nil
    renegotiation = nil
    deferredOffer = nil
    remoteBeingApplied = nil
    awaitingRestartAnswer = false
    cameraOpen = nil
    negotiatedOnce = false
    waitingForGathering = nil
    resetGathering()
    return [.replaceConnection(generation: generation)]
  }

  private mutating func connectionMade(_ restartable: Bool) -> [Effect] {
    hasConnection = true
    canRestartIce = restartable
    var effects: [Effect] = [.setAudio(generation: generation, !isMuted && !isOnHold)]
    switch (role, state) {
    case (.caller, .idle):
      state = .calling
      effects += makeOffer(.invite, iceRestart: false)
    case (.caller, _):
      // A fresh connection for a restart: its first offer restarts ICE by being new.
      effects += makeOffer(.restartOffer, iceRestart: false)
    case (.callee, .idle):
      state = .incoming
      if let offer = pendingOffer {
        pendingOffer = nil
        effects += applyRemote(offer, .offer, then: .nothing)
      }
    case (.callee, _):
      if let offer = pendingOffer {
        pendingOffer = nil
        effects += applyRemote(offer, .offer, then: acceptOnNextOffer ? .acceptIt : .answerIt)
        acceptOnNextOffer = false
      }
    }
    return effects + cameraEffect()
  }

  private mutating func makeOffer(_ purpose: Purpose, iceRestart: Bool) -> [Effect] {
    local = (purpose, nil)
    if purpose == .renegotiate {
      renegotiation = .making(sends: sendsVideo)
    } else {
      negotiatedSendsVideo = sendsVideo
    }
    // Every offer takes the other side's video: whether it sends is the other side's choice
    // (an audio call's section is recvonly, answered inactive).
    let direction = MediaDirection(sends: sendsVideo, receives: true)
    return [
      .setVideoDirection(generation: generation, direction),
      .createOffer(generation: generation, iceRestart: iceRestart),
    ]
  }

  /// An answer takes whatever video the offer sends (the stack intersects the directions).
  private mutating func makeAnswer(_ purpose: Purpose) -> [Effect] {
    local = (purpose, nil)
    negotiatedSendsVideo = sendsVideo && remoteReceivesVideo
    return [
      .setVideoDirection(generation: generation, MediaDirection(sends: sendsVideo, receives: true)),
      .createAnswer(generation: generation),
    ]
  }

  /// Renegotiates when what we send differs from what was last negotiated, once nothing else
  /// is being negotiated (an ICE restart, an answer, the other side's offer).
  private mutating func renegotiateIfNeeded() -> [Effect] {
    guard hasConnection, isNegotiated, restartAttempt == 0, !awaitingRestartAnswer, local == nil,
      renegotiation == nil, deferredOffer == nil, remoteBeingApplied == nil, afterRemote == .nothing,
      waitingForGathering == nil, sendsVideo != negotiatedSendsVideo
    else { return [] }
    guard canRestartIce else { return renegotiateByRestart() }
    return makeOffer(.renegotiate, iceRestart: false)
  }

  /// A connection that cannot change a negotiated direction in place (webrtcbin 1.22) cannot
  /// restart ICE either: the caller renegotiates on a fresh connection, as after a lost path;
  /// the callee asks it to (its answer from a fresh connection then carries its change).
  private mutating func renegotiateByRestart() -> [Effect] {
    switch role {
    case .caller:
      guard restartAttempt == 0, !awaitingRestartAnswer else { return [] }
      return cancelPolicyTimer() + restart(attempt: 1)
    case .callee:
      guard !restartRequested else { return [] }
      restartRequested = true
      return [.send(.iceRestartRequest(.init(callId: callId)))]
    }
  }

  /// A negotiation just completed: the offer that waited for it, or a renegotiation of ours.
  private mutating func settled() -> [Effect] {
    if let offer = deferredOffer {
      deferredOffer = nil
      return applyRemote(offer, .offer, then: .answerIt)
    }
    return renegotiateIfNeeded()
  }

  /// The camera sends while it is on, this side sends video, and the other side was told so;
  /// the connection hears of changes only.
  private mutating func cameraEffect() -> [Effect] {
    let open = isVideoEnabled && sendsVideo && negotiatedSendsVideo
    guard hasConnection, open != cameraOpen else { return [] }
    cameraOpen = open
    return [.setVideo(generation: generation, open)]
  }

  /// setRemoteDescription; the buffered candidates follow it in arrival order once it is set.
  private mutating func applyRemote(
    _ description: SessionDescription, _ kind: SessionDescriptionKind,
    then next: AfterRemote
  ) -> [Effect] {
    remoteReady = false
    afterRemote = next
    remoteBeingApplied = description
    return [.setRemote(generation: generation, description, kind)]
  }

  private mutating func remoteApplied() -> [Effect] {
    var effects = pendingRemoteCandidates.map { Effect.addCandidate(generation: generation, $0) }
    pendingRemoteCandidates.removeAll()
    remoteReady = true
    if let applied = remoteBeingApplied, let direction = MediaDirection.video(in: applied.sdp) {
      remoteReceivesVideo = direction.receives
      if direction.sends != remoteSendsVideo {
        remoteSendsVideo = direction.sends
        effects.append(.remoteVideo(direction.sends))
      }
    }
    remoteBeingApplied = nil
    if afterRemote == .acceptIt {
      afterRemote = .nothing
      return effects + makeAnswer(.accept)
    }
    let answering = afterRemote == .answerIt
    afterRemote = .nothing
    if answering && state != .incoming { return effects + makeAnswer(.answer) }
    // An answer (or the caller's first one, in accept) completes a negotiation.
    return effects + (answering ? [] : settled())
  }

  private mutating func sendLocal(_ purpose: Purpose, _ description: SessionDescription) -> [Effect] {
    switch purpose {
    case .invite:
      return [
        .send(
          .invite(
            .init(callId: callId, to: remoteUserId ?? "", video: video, offer: description, preconnect: preconnects)))
      ]
    case .restartOffer:
      awaitingRestartAnswer = true
      return [.send(.offer(.init(callId: callId, sdp: description.sdp, iceRestart: true)))]
    case .accept:
      negotiatedOnce = true
      return [.send(.accept(.init(callId: callId, answer: description)))] + cameraEffect() + settled()
    case .answer:
      negotiatedOnce = true
      return [.send(.answer(.init(callId: callId, sdp: description.sdp)))] + cameraEffect() + settled()
    case .renegotiate, .renegotiated:
      return []  // never set before it is sent (see Renegotiation)
    }
  }

  /// A failed offer or answer ends the call with the request its state calls for.
  private mutating func localDescriptionFailed(_ why: String) -> [Effect] {
    switch local?.purpose {
    case .invite?: return end(.error("offer: \(why)"), notify: .cancel(.init(callId: callId)))
    case .restartOffer?: return end(.error("restart offer: \(why)"), notify: .hangup(.init(callId: callId)))
    case .accept?: return end(.error("answer: \(why)"), notify: .decline(.init(callId: callId)))
    case .answer?, .renegotiate?, .renegotiated?:
      return end(.error("answer: \(why)"), notify: .hangup(.init(callId: callId)))
    case nil: return []
    }
  }

  private mutating func localCandidate(_ candidate: IceCandidate?) -> [Effect] {
    guard policy.trickle else {
      if let candidate {
        gathered.append(candidate)
        return []
      }
      return finishGathering()
    }
    if let candidate { return [.send(.candidate(.init(callId: callId, candidate: candidate)))] }
    return [.send(.endOfCandidates(.init(callId: callId)))]
  }

  private func audioEffect() -> [Effect] {
    hasConnection ? [.setAudio(generation: generation, !isMuted && !isOnHold)] : []
  }

  // MARK: Without trickle

  private mutating func resetGathering() {
    gathered = []
    gatheringDone = false
  }

  private mutating func finishGathering() -> [Effect] {
    gatheringDone = true
    guard let (purpose, description) = waitingForGathering else { return [] }
    waitingForGathering = nil
    return [.cancel(.gathering(generation: generation))] + sendLocal(purpose, withGathered(description))
  }

  private func withGathered(_ description: SessionDescription) -> SessionDescription {
    SessionDescription(sdp: SDPCandidates.embedding(gathered, in: description.sdp))
  }

  // MARK: ICE policy (rule 3)

  private mutating func connectionStateChanged(_ newState: PeerConnectionState) -> [Effect] {
    switch newState {
    case .new, .checking, .closed:
      return []
    case .connected:
      restartAttempt = 0
      state = .connected
      return cancelPolicyTimer() + renegotiateIfNeeded()
    case .disconnected:
      // A running restart has its own timeout.
      guard isNegotiated, restartAttempt == 0, policyTimer == nil else { return [] }
      state = .reconnecting(attempt: 0)
      return armPolicyTimer(after: policy.disconnectedGrace, .restart(attempt: 1))
    case .failed:
      guard isNegotiated else { return [] }
      return cancelPolicyTimer() + restartFailedOrBegin()
    }
  }

  /// `failed` with no restart in flight restarts at once; a failed restart k is retried after
  /// `retryBackoff[k-1]`; when the last retry fails, the call ends.
  private mutating func restartFailedOrBegin() -> [Effect] {
    let k = restartAttempt
    if k == 0 { return restart(attempt: 1) }
    if k > policy.retryBackoff.count { return end(.iceFailed, notify: .hangup(.init(callId: callId))) }
    return armPolicyTimer(after: policy.retryBackoff[k - 1], .restart(attempt: k + 1))
  }

  private mutating func restart(attempt k: Int) -> [Effect] {
    restartAttempt = k
    state = .reconnecting(attempt: k)
    let timeout = armPolicyTimer(after: policy.attemptTimeout, .restartFailedOrBegin)
    switch role {
    case .callee:
      // The answerer never restarts itself: it asks the offerer.
      return timeout + [.send(.iceRestartRequest(.init(callId: callId)))]
    case .caller:
      guard hasConnection else { return timeout }
      if !canRestartIce { return timeout + replaceConnection() }
      return timeout + makeOffer(.restartOffer, iceRestart: true)
    }
  }

  private mutating func armPolicyTimer(after delay: Duration, _ action: PolicyAction) -> [Effect] {
    let cancelled = cancelPolicyTimer()
    nextTimerToken += 1
    policyTimer = (nextTimerToken, action)
    return cancelled + [.arm(.policy(token: nextTimerToken), after: delay)]
  }

  private mutating func cancelPolicyTimer() -> [Effect] {
    guard let timer = policyTimer else { return [] }
    policyTimer = nil
    return [.cancel(.policy(token: timer.token))]
  }

  // MARK: Ending

  private mutating func end(_ ending: CallEngine.Ending, notify request: ClientMessage?) -> [Effect] {
    state = .ended(ending)
    var effects = cancelPolicyTimer() + legs.closeAll()
    if waitingForGathering != nil { effects.append(.cancel(.gathering(generation: generation))) }
    waitingForGathering = nil
    local = nil
    pendingRemoteCandidates.removeAll()
    if let request { effects.append(.send(request)) }
    return effects + [.finish]
  }

  private func cancelOrHangup() -> ClientMessage {
    switch state {
    case .incoming: return .decline(.init(callId: callId))
    case .idle, .calling, .ringing:
      return role == .caller ? .cancel(.init(callId: callId)) : .decline(.init(callId: callId))
    default: return .hangup(.init(callId: callId))
    }
  }

  /// Accepted: ICE events drive the restart policy only from here on.
  private var isNegotiated: Bool {
    switch state {
    case .connecting, .connected, .reconnecting: return true
    case .idle, .calling, .ringing, .incoming, .ended: return false
    }
  }
}

extension CallEngineMachine.Event {
  /// The connection generation a peer-connection event is for.
  var generation: Int? {
    switch self {
    case .connectionMade(let gen, _), .connectionFailed(let gen, _), .offerCreated(let gen, _),
      .answerCreated(let gen, _), .localDescriptionSet(let gen), .remoteDescriptionSet(let gen),
      .localDescriptionFailed(let gen, _), .remoteDescriptionFailed(let gen, _), .localCandidate(let gen, _),
      .connectionState(let gen, _):
      return gen
    case .timerFired(.gathering(let gen)):
      return gen
    default:
      return nil
    }
  }
}
