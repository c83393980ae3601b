import DialtoneProtocol
import Foundation

/// One call's negotiation as a pure value: `handle(_:)` takes an event (an app action, a server
/// message, a peer-connection result or callback, a timer) and returns the effects to run, in
/// order. `CallEngine` runs the effects and feeds their results back as events.
///
/// The call's state is one `Phase` whose cases carry exactly the data valid in them (see
/// `CallEnginePhase.swift`); besides it the machine keeps only what the user chose (mute, hold,
/// camera, video), what the other side said (its device, its video, its hold) and two counters.
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
    /// The other side put the call on hold (true) or took it off (`hold`): for the UI; no audio
    /// comes from it meanwhile.
    case remoteHold(Bool)
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

  public let callId: CallID
  public let role: CallEngine.Role
  public let policy: CallEngine.Policy
  let remoteUserId: String?
  /// Placed or offered as a video call: every connection reserves a video transceiver.
  public let video: Bool
  /// Callee: the invite's offer, kept for accepting on it if the server refuses the accept on
  /// our leg (9b: it lost the legs in a restart).
  let inviteOffer: SessionDescription?
  /// Pre-connect is on for this call: the policy asks for it (the server agreed, and for a
  /// callee the invite offered it), with trickle. A callee whose leg would be private but has no
  /// TURN server to relay it asks for none: a relay-only leg without a relay never connects, and
  /// the call is negotiated after Answer instead.
  let preconnects: Bool

  /// Where the call is, with the data valid there.
  var phase: Phase

  // What the user chose; valid in every phase.
  public internal(set) var isMuted = false
  public internal(set) var isOnHold = false
  public internal(set) var isVideoEnabled = true
  /// Whether this side wants to send video (the call was placed or answered as a video call,
  /// or upgraded).
  public internal(set) var sendsVideo: Bool

  // What the other side said.
  /// The remote device once known (the inviting caller, or the accepting callee).
  public internal(set) var remotePeer: Peer?
  /// Whether the other side sends video, from the direction of its latest description.
  public internal(set) var remoteSendsVideo = false
  /// Whether the other side's latest description takes video (an answer cannot send otherwise).
  var remoteReceivesVideo = true
  /// The other side holds the call (`hold`).
  public internal(set) var remoteIsOnHold = false

  /// The last generation handed out, to the current connection or to a leg.
  private var generations = 0
  /// The last policy-timer token handed out.
  private var timerTokens = 0

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
    self.inviteOffer = role == .callee ? offer : nil
    self.video = video
    self.sendsVideo = video
    self.policy = policy
    preconnects =
      policy.preconnect && policy.trickle && (role == .caller || !policy.privatePreconnect || relayAvailable)
    phase = .idle(offer: role == .callee ? offer : nil, candidates: [])
  }

  // MARK: What the app reads

  public var state: CallEngine.State {
    switch phase {
    case .idle, .starting: .idle
    case .dialing(let dialing): dialing.alerting ? .ringing : .calling
    case .incoming: .incoming
    case .talking(let talking): talking.recovery.state
    case .ended(let ending): .ended(ending)
    }
  }

  /// The current peer connection's generation (0: none).
  public var generation: Int {
    switch phase {
    case .idle, .ended: 0
    case .starting(let making): making.generation
    case .dialing(let dialing): dialing.connection.generation
    case .incoming(let incoming): incoming.connection.generation
    case .talking(let talking): talking.link.generation
    }
  }

  /// A video call for the UI: either side sends video.
  public var hasVideo: Bool { sendsVideo || remoteSendsVideo }

  public var isEnded: Bool {
    if case .ended = phase { return true }
    return false
  }

  // MARK: Transitions

  public mutating func handle(_ event: Event) -> [Effect] {
    if isEnded { return [] }
    if let gen = event.generation, gen != generation, var legs, legs.owns(gen) {
      let effects = legs.handle(event, sendsVideo: sendsVideo)
      self.legs = legs
      return effects
    }
    switch event {
    case .start:
      return start()
    case .accept:
      return accept()
    case .hangup:
      return end(.local, notify: cancelOrHangup())
    case .setMuted(let muted):
      isMuted = muted
      return audioEffect()
    case .setOnHold(let held):
      let changed = isOnHold != held
      isOnHold = held
      var effects = audioEffect()
      // The peer is told once the call is up (a hold from before is told as the call comes up).
      if changed, case .talking = phase { effects.append(.send(.hold(.init(callId: callId, onHold: held)))) }
      return effects
    case .setVideoEnabled(let enabled):
      let changed = isVideoEnabled != enabled
      isVideoEnabled = enabled
      var effects = cameraEffect()
      // The peer is told once the call is up (before that, the invite or accept says it).
      if changed, case .talking = phase {
        effects.append(.send(.mediaState(.init(callId: callId, camera: enabled))))
      }
      return effects
    case .setSendsVideo(let sends):
      guard sends != sendsVideo else { return [] }
      sendsVideo = sends
      // Stopping closes the camera at once; starting waits for the answer.
      return cameraEffect() + renegotiateIfNeeded()
    case .server(let message):
      return received(message)
    case .connectionMade(let gen, let restartable):
      return gen == generation ? connectionMade(canRestartIce: restartable) : []
    case .connectionFailed(let gen, let why):
      return gen == generation ? end(.error("peer connection: \(why)"), notify: cancelOrHangup()) : []
    case .offerCreated(let gen, let offer):
      return gen == generation ? created(offer, .offer) : []
    case .answerCreated(let gen, let answer):
      return gen == generation ? created(answer, .answer) : []
    case .localDescriptionSet(let gen):
      return gen == generation ? localDescriptionSet() : []
    case .remoteDescriptionSet(let gen):
      return gen == generation ? remoteDescriptionSet() : []
    case .localDescriptionFailed(let gen, let why):
      return gen == generation ? localDescriptionFailed(why) : []
    case .remoteDescriptionFailed(let gen, let why):
      return gen == generation ? end(.error("remote description: \(why)"), notify: cancelOrHangup()) : []
    case .localCandidate(let gen, let candidate):
      return gen == generation ? localCandidate(candidate) : []
    case .connectionState(let gen, let newState):
      return gen == generation ? connectionStateChanged(newState) : []
    case .timerFired(.gathering(let gen)):
      return gen == generation ? finishGathering() : []
    case .timerFired(.policy(let token)):
      return policyTimerFired(token)
    case .signalingFailed(let why):
      return end(.error("signaling: \(why)"), notify: nil)
    }
  }

  // MARK: Starting and answering

  private mutating func start() -> [Effect] {
    guard case .idle(let offer, let early) = phase else { return [] }
    // The caller hears ringback as soon as this device alerts, not after the (slow) peer
    // connection is built.
    let ringing: [Effect] =
      role == .callee ? [.send(.ringing(.init(callId: callId, preconnect: preconnects)))] : []
    let making = Making(
      generation: nextGeneration(), candidates: early,
      offer: offer.map { PendingOffer(description: $0, then: .waitForUser) })
    phase = .starting(making)
    return ringing + [.replaceConnection(generation: making.generation)]
  }

  /// The user answered. It is never dropped: before the first connection exists (a very fast
  /// Answer) the call is accepted at once and the answer follows the connection; before `start`
  /// it starts the call first.
  private mutating func accept() -> [Effect] {
    guard role == .callee else { return [] }
    switch phase {
    case .idle:
      return start() + accept()
    case .starting(var making):
      // With the invite's offer the accept carries the answer, once the connection made it;
      // without one the accept goes now and the caller's offer follows.
      var effects: [Effect] = []
      if making.offer != nil {
        making.offer?.then = .accept
      } else {
        effects += acceptance(answer: nil)
      }
      phase = .talking(Talking(link: .making(making), recovery: .connecting))
      return effects
    case .incoming(var incoming):
      // The accept first: media follows it (9b).
      let accept = acceptance(answer: nil)
      if incoming.legs.calleeLeg?.answered == true, let adopted = adoptLeg(from: &incoming.legs, device: nil) {
        return accept + adopted
      }
      let closed = incoming.legs.closeAll()
      var connection = incoming.connection
      var effects = closed
      switch connection.negotiation {
      case .applying(let video, _):
        // The invite's offer is still being applied: the answer (and the accept) follow it.
        connection.negotiation = .applying(video: video, then: .accept)
        phase = .talking(Talking(link: .made(connection), recovery: .connecting))
      case .offerApplied:
        phase = .talking(Talking(link: .made(connection), recovery: .connecting))
        effects += makeAnswer(.accept)
      case .none, .stable, .creating, .setting, .gathering, .awaitingAnswer, .renegotiating, .renegotiated:
        // No offer yet (the invite had none): accept, and answer the caller's offer when it comes.
        phase = .talking(Talking(link: .made(connection), recovery: .connecting))
        effects += accept
      }
      return effects
    case .dialing, .talking, .ended:
      return []
    }
  }

  private mutating func connectionMade(canRestartIce: Bool) -> [Effect] {
    let making: Making
    switch phase {
    case .starting(let starting): making = starting
    case .talking(let talking):
      guard case .making(let replacing) = talking.link else { return [] }
      making = replacing
    case .idle, .dialing, .incoming, .ended:
      return []
    }
    let connection = Connection(
      generation: making.generation, canRestartIce: canRestartIce, candidates: .waiting(making.candidates))
    var effects: [Effect] = [.setAudio(generation: connection.generation, audible)]
    switch phase {
    case .starting where role == .caller:
      phase = .dialing(Dialing(connection: connection, legs: PreconnectLegs(role: role, callId: callId)))
      effects += makeOffer(.invite, iceRestart: false)
    case .starting:
      phase = .incoming(
        Incoming(
          connection: connection,
          legs: PreconnectLegs(role: role, callId: callId, relayOnly: policy.privatePreconnect)))
    case .talking(var talking):
      talking.link = .made(connection)
      phase = .talking(talking)
      // A fresh connection for a restart: its first offer restarts ICE by being new.
      if role == .caller { effects += makeOffer(.restartOffer, iceRestart: false) }
    case .idle, .dialing, .incoming, .ended:
      return []
    }
    if let offer = making.offer { effects += applyRemote(offer.description, .offer, then: offer.then) }
    return effects + cameraEffect()
  }

  /// The callee's `accept` and, when the call is held here already, the `hold` that follows it
  /// (the server relays a hold only once the call is accepted).
  func acceptance(answer: SessionDescription?) -> [Effect] {
    [.send(.accept(.init(callId: callId, answer: answer)))] + holdNotice
  }

  /// Held before the call came up: the other side hears of it as it does.
  var holdNotice: [Effect] {
    isOnHold ? [.send(.hold(.init(callId: callId, onHold: true)))] : []
  }

  // MARK: Media the user controls

  var audible: Bool { !isMuted && !isOnHold }

  private func audioEffect() -> [Effect] {
    guard let connection else { return [] }
    return [.setAudio(generation: connection.generation, audible)]
  }

  /// The camera sends while it is on, this side sends video, and the other side was told so;
  /// the connection hears of changes only.
  mutating func cameraEffect() -> [Effect] {
    guard var connection else { return [] }
    let open = isVideoEnabled && sendsVideo && connection.sendsVideo
    guard open != connection.camera else { return [] }
    connection.camera = open
    self.connection = connection
    return [.setVideo(generation: connection.generation, open)]
  }

  // MARK: Ending

  /// - Parameter policyTimerFired: the policy timer just fired (nothing to cancel).
  mutating func end(_ ending: CallEngine.Ending, notify request: ClientMessage?, policyTimerFired: Bool = false)
    -> [Effect]
  {
    var effects = policyTimerFired ? [] : policyTimerCancel
    if var legs { effects += legs.closeAll() }
    if let connection, case .gathering = connection.negotiation {
      effects.append(.cancel(.gathering(generation: connection.generation)))
    }
    phase = .ended(ending)
    if let request { effects.append(.send(request)) }
    return effects + [.finish]
  }

  /// What hanging up sends: cancel (the caller, before the accept), decline (a callee, before
  /// its accept) or hangup.
  func cancelOrHangup() -> ClientMessage {
    switch phase {
    case .idle, .starting, .dialing, .incoming:
      return role == .caller ? .cancel(.init(callId: callId)) : .decline(.init(callId: callId))
    case .talking, .ended:
      return .hangup(.init(callId: callId))
    }
  }

  // MARK: The phase's parts

  /// The current connection, once made, in whichever phase holds one. Setting it writes it
  /// back into that phase (and does nothing in a phase without a made connection).
  var connection: Connection? {
    get {
      switch phase {
      case .dialing(let dialing): dialing.connection
      case .incoming(let incoming): incoming.connection
      case .talking(let talking):
        if case .made(let connection) = talking.link { connection } else { nil }
      case .idle, .starting, .ended: nil
      }
    }
    set {
      guard let newValue else { return }
      switch phase {
      case .dialing(var dialing):
        dialing.connection = newValue
        phase = .dialing(dialing)
      case .incoming(var incoming):
        incoming.connection = newValue
        phase = .incoming(incoming)
      case .talking(var talking):
        guard case .made(let old) = talking.link, old.generation == newValue.generation else { return }
        talking.link = .made(newValue)
        phase = .talking(talking)
      case .idle, .starting, .ended:
        return
      }
    }
  }

  /// The legs of a ringing call (nil once accepted, or before the first connection exists).
  var legs: PreconnectLegs? {
    get {
      switch phase {
      case .dialing(let dialing): dialing.legs
      case .incoming(let incoming): incoming.legs
      case .idle, .starting, .talking, .ended: nil
      }
    }
    set {
      guard let newValue else { return }
      switch phase {
      case .dialing(var dialing):
        dialing.legs = newValue
        phase = .dialing(dialing)
      case .incoming(var incoming):
        incoming.legs = newValue
        phase = .incoming(incoming)
      case .idle, .starting, .talking, .ended:
        return
      }
    }
  }

  mutating func nextGeneration() -> Int {
    generations += 1
    return generations
  }

  mutating func nextTimerToken() -> Int {
    timerTokens += 1
    return timerTokens
  }
}

extension CallEngineMachine.Event {
  /// The connection generation a peer-connection event is for.
  var generation: Int? {
    switch self {
    case .connectionMade(let gen, _), .connectionFailed(let gen, _), .offerCreated(let gen, _),
      .answerCreated(let gen, _), .localDescriptionSet(let gen), .remoteDescriptionSet(let gen),
      .localDescriptionFailed(let gen, _), .remoteDescriptionFailed(let gen, _), .localCandidate(let gen, _),
      .connectionState(let gen, _), .timerFired(.gathering(let gen)):
      return gen
    case .start, .accept, .hangup, .setMuted, .setOnHold, .setVideoEnabled, .setSendsVideo, .server,
      .timerFired(.policy), .signalingFailed:
      return nil
    }
  }
}
