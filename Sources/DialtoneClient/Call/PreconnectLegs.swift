import DialtoneProtocol

/// The pre-connected legs of a ringing call (protocol.md 11), a pure value inside
/// `CallEngineMachine`: the caller's one connection per callee device that asked, or the
/// callee's one connection to the caller. A leg is negotiated once, with trickle, on a
/// connection whose media is held (nothing is sent) until the call is accepted on it; the
/// machine then adopts it as its current connection. Events of a leg's generation come here,
/// and the effects are the machine's.
///
///     caller:  requested ─▶ making ─▶ offering ─▶ offered ──answer──▶ answered ─(accept)─▶ adopted
///     callee:  offer ─▶ making ─▶ applying ─▶ answering ─▶ answered ─(user answers)─▶ adopted
///
/// A leg that fails is closed: a callee asks again (`ringing` `preconnect`), a caller makes a
/// new one when asked. Nothing of it is shown to the user.
///
/// A callee's leg is private by default (`CallEngine.Policy.privatePreconnect`): it gathers
/// relay candidates only, so the caller learns no address of a device that has not answered.
/// Such a leg carries the call only if it connected before Answer (a relay that failed would
/// never connect): otherwise the callee accepts on the invite's offer.
struct PreconnectLegs: Sendable, Equatable {
  typealias Effect = CallEngineMachine.Effect

  struct Leg: Sendable, Equatable {
    let generation: Int
    /// Caller: the callee device it is for. Callee: empty (its peer is the caller's device).
    let device: String
    /// What its connection gathers (`relay`: a callee's private leg).
    var iceTransportPolicy = IceTransportPolicy.all
    var hasConnection = false
    var canRestartIce = true
    /// Callee: the leg's offer, applied once the connection exists.
    var remoteOffer: SessionDescription?
    /// The remote description is set: remote candidates go straight in.
    var remoteReady = false
    var pendingRemote: [IceCandidate] = []
    /// Local candidates (nil: gathering done) gathered before the offer or answer went out.
    var pendingLocal: [IceCandidate?] = []
    var localSent = false
    /// The description being made or set locally.
    var local: SessionDescription?
    /// Caller: the device's early answer arrived. Callee: ours went out.
    var answered = false
    var connected = false
    /// The video direction of the other side's description.
    var remoteVideo: MediaDirection?
  }

  let role: CallEngine.Role
  let callId: CallID
  /// Callee: its legs gather relay candidates only.
  let relayOnly: Bool
  private(set) var legs: [Int: Leg] = [:]
  /// Callee: how many times a failed leg may be asked for again while the call rings.
  static let retries = 2
  private var retriesLeft = retries

  init(role: CallEngine.Role, callId: CallID, relayOnly: Bool = false) {
    self.role = role
    self.callId = callId
    self.relayOnly = relayOnly
  }

  /// Whether a TURN server among `servers` can relay a private leg: a `turn:` or `turns:` URL
  /// with credentials.
  static func offersRelay(_ servers: [IceServer]) -> Bool {
    servers.contains { server in
      server.username != nil && server.credential != nil
        && server.urls.contains { url in
          let scheme = url.prefix { $0 != ":" }.lowercased()
          return scheme == "turn" || scheme == "turns"
        }
    }
  }

  func owns(_ generation: Int) -> Bool { legs[generation] != nil }

  func leg(forDevice device: String) -> Leg? { legs.values.first { $0.device == device } }

  /// The callee's one leg.
  var calleeLeg: Leg? { legs.values.first }

  // MARK: Opening

  /// Caller: `device` asked for a leg (`ringing` `preconnect`). A device asking again gets a
  /// new leg in place of its old one; past the cap, nothing.
  mutating func requested(by device: String, generation: Int) -> [Effect] {
    var effects: [Effect] = []
    if let old = leg(forDevice: device) { effects += close(old.generation) }
    guard legs.count < ProtocolDefaults.maxPreconnectLegs else { return effects }
    legs[generation] = Leg(generation: generation, device: device)
    return effects + [.makeLeg(generation: generation, .all)]
  }

  /// Callee: the caller offered a leg (`offer` with `leg`). A new offer replaces the leg.
  mutating func offered(_ offer: SessionDescription, generation: Int) -> [Effect] {
    var effects: [Effect] = []
    for old in legs.keys { effects += close(old) }
    var leg = Leg(generation: generation, device: "")
    leg.iceTransportPolicy = relayOnly ? .relay : .all
    leg.remoteOffer = offer
    leg.remoteVideo = MediaDirection.video(in: offer.sdp)
    legs[generation] = leg
    return effects + [.makeLeg(generation: generation, leg.iceTransportPolicy)]
  }

  // MARK: The leg's own events

  /// An event of a leg's generation; `sendsVideo`: what this side's description offers.
  mutating func handle(_ event: CallEngineMachine.Event, sendsVideo: Bool) -> [Effect] {
    switch event {
    case .connectionMade(let gen, let restartable):
      guard var leg = legs[gen] else { return [] }
      leg.hasConnection = true
      leg.canRestartIce = restartable
      let direction = Effect.setVideoDirection(generation: gen, MediaDirection(sends: sendsVideo, receives: true))
      if let offer = leg.remoteOffer {
        leg.remoteOffer = nil
        legs[gen] = leg
        return [direction, .setRemote(generation: gen, offer, .offer)]
      }
      legs[gen] = leg
      return [direction, .createOffer(generation: gen, iceRestart: false)]
    case .connectionFailed(let gen, _), .localDescriptionFailed(let gen, _), .remoteDescriptionFailed(let gen, _):
      return legs[gen] == nil ? [] : failed(gen)
    case .offerCreated(let gen, let description), .answerCreated(let gen, let description):
      guard legs[gen] != nil else { return [] }
      legs[gen]?.local = description
      return [.setLocal(generation: gen, description, role == .caller ? .offer : .answer)]
    case .localDescriptionSet(let gen):
      guard var leg = legs[gen], let description = leg.local else { return [] }
      leg.local = nil
      leg.localSent = true
      var effects: [Effect]
      switch role {
      case .caller:
        effects = [.send(.offer(.init(callId: callId, sdp: description.sdp, toDevice: leg.device)))]
      case .callee:
        leg.answered = true
        effects = [.send(.answer(.init(callId: callId, sdp: description.sdp)))]
      }
      effects += leg.pendingLocal.map { send($0, for: leg) }
      leg.pendingLocal = []
      legs[gen] = leg
      return effects
    case .remoteDescriptionSet(let gen):
      guard var leg = legs[gen] else { return [] }
      leg.remoteReady = true
      var effects = leg.pendingRemote.map { Effect.addCandidate(generation: gen, $0) }
      leg.pendingRemote = []
      if role == .callee { effects.append(.createAnswer(generation: gen)) }
      legs[gen] = leg
      return effects
    case .localCandidate(let gen, var candidate):
      guard var leg = legs[gen] else { return [] }
      if let gathered = candidate, leg.iceTransportPolicy == .relay {
        // A private leg: the relay's address only, never the device's (PrivateCandidates).
        guard let relay = PrivateCandidates.relayOnly(gathered) else { return [] }
        candidate = relay
      }
      guard leg.localSent else {
        leg.pendingLocal.append(candidate)
        legs[gen] = leg
        return []
      }
      return [send(candidate, for: leg)]
    case .connectionState(let gen, let state):
      guard legs[gen] != nil else { return [] }
      switch state {
      case .connected:
        let first = legs[gen]?.connected == false
        legs[gen]?.connected = true
        if first, let device = legs[gen]?.device { return [.legConnected(device: device)] }
      case .disconnected: legs[gen]?.connected = false
      case .failed, .closed: return failed(gen)
      case .new, .checking: break
      }
      return []
    case .start, .accept, .hangup, .setMuted, .setOnHold, .setVideoEnabled, .setSendsVideo, .server, .timerFired,
      .signalingFailed:
      return []  // not a connection's (the machine hands a leg only its generation's events)
    }
  }

  private func send(_ candidate: IceCandidate?, for leg: Leg) -> Effect {
    let toDevice = role == .caller ? leg.device : nil
    guard let candidate else { return .send(.endOfCandidates(.init(callId: callId, toDevice: toDevice))) }
    return .send(.candidate(.init(callId: callId, candidate: candidate, toDevice: toDevice)))
  }

  // MARK: The other side's leg signaling

  /// Caller: a device's early answer.
  mutating func answered(_ answer: SessionDescription, by device: String) -> [Effect] {
    guard var leg = leg(forDevice: device), leg.localSent, !leg.answered else { return [] }
    leg.answered = true
    leg.remoteVideo = MediaDirection.video(in: answer.sdp)
    legs[leg.generation] = leg
    return [.setRemote(generation: leg.generation, answer, .answer)]
  }

  /// A remote candidate for the leg of `device` (the callee's one leg: pass nil).
  mutating func remoteCandidate(_ candidate: IceCandidate, device: String?) -> [Effect] {
    guard var leg = device.map({ leg(forDevice: $0) }) ?? calleeLeg else { return [] }
    guard leg.remoteReady else {
      leg.pendingRemote.append(candidate)
      legs[leg.generation] = leg
      return []
    }
    return [.addCandidate(generation: leg.generation, candidate)]
  }

  // MARK: Closing and adopting

  /// A leg that failed while ringing closes; a callee asks for a new one, a few times, without
  /// a word to the user (the call rings on and can always be answered on the main offer).
  private mutating func failed(_ generation: Int) -> [Effect] {
    let closed = close(generation)
    guard role == .callee, retriesLeft > 0 else { return closed }
    retriesLeft -= 1
    return closed + [.send(.ringing(.init(callId: callId, preconnect: true)))]
  }

  mutating func close(_ generation: Int) -> [Effect] {
    guard legs.removeValue(forKey: generation) != nil else { return [] }
    return [.closeLeg(generation: generation)]
  }

  mutating func closeAll() -> [Effect] {
    legs.keys.sorted().flatMap { close($0) }
  }

  /// The leg the call is accepted on, taken out of the set, and the closing of every other
  /// leg. Nil when that leg cannot carry the call (no leg, not answered yet, or a relay-only
  /// leg that has not connected: its relay may have failed); the legs stay.
  mutating func adopt(device: String?) -> (Leg, [Effect])? {
    guard let chosen = device.map({ leg(forDevice: $0) }) ?? calleeLeg, chosen.answered, chosen.hasConnection,
      chosen.iceTransportPolicy == .all || chosen.connected
    else {
      return nil
    }
    legs.removeValue(forKey: chosen.generation)
    return (chosen, closeAll())
  }
}
