import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The server-side call state machine for 1:1 calls.
///
///     ringing ──accept──▶ accepted ──hangup / grace expired──▶ ended(reason)
///        │
///        └── decline · busy · cancel · ring timeout (missed) · glare · caller lost ──▶ ended(reason)
///
/// While it rings, a call whose invite asked for pre-connect (protocol.md 11) also has legs: a
/// callee device asks with `ringing` `preconnect`, the caller offers it a connection of its own
/// (`toDevice`), the device's early answer and both sides' candidates are relayed on it, and an
/// `accept` without SDP from a device whose leg was answered accepts on that leg. Legs live only
/// while the call rings and are not journaled: after a restart a device accepts with today's flow.
///
/// A pure value: every input returns the reply and the effects (messages, timers, events) that
/// the hub applies, so tests drive it without sockets or real time.
package struct CallRouter {
  package struct Settings: Sendable {
    package var ringTimeout: Duration = .seconds(45)
    package var reconnectGrace: Duration = .seconds(30)
    /// Ended calls stay queryable with `get-call` this long.
    package var endedRetention: Duration = .seconds(600)
    /// Caller signaling held for late callee devices while a call rings: at most this many
    /// messages, and this many bytes of SDP and candidates.
    package var maxBufferedSignals = 512
    package var maxBufferedSignalBytes = 256 << 10
    /// Calls one user may have ringing or connected as the caller.
    package var maxLiveCallsPerUser = 8
    /// Callee devices of one call with a pre-connected leg (9b).
    package var maxPreconnectLegs = ProtocolDefaults.maxPreconnectLegs
    /// The grace of every device of a call restored after a restart: the reconnect grace plus the
    /// longest reconnect backoff (protocol.md 14), so a client that was backing off still makes it.
    package var restartGrace: Duration = .seconds(60)

    package init(
      ringTimeout: Duration = .seconds(45), reconnectGrace: Duration = .seconds(30),
      endedRetention: Duration = .seconds(600), maxBufferedSignals: Int = 512, maxBufferedSignalBytes: Int = 256 << 10,
      maxLiveCallsPerUser: Int = 8, maxPreconnectLegs: Int = ProtocolDefaults.maxPreconnectLegs,
      restartGrace: Duration = .seconds(60)
    ) {
      self.ringTimeout = ringTimeout
      self.reconnectGrace = reconnectGrace
      self.endedRetention = endedRetention
      self.maxBufferedSignals = maxBufferedSignals
      self.maxBufferedSignalBytes = maxBufferedSignalBytes
      self.maxLiveCallsPerUser = maxLiveCallsPerUser
      self.maxPreconnectLegs = maxPreconnectLegs
      self.restartGrace = restartGrace
    }
  }

  /// What the caller's invite asked for; the relayed invite is built from it.
  package struct Invitation: Sendable, Equatable {
    /// The caller's offer, while the call rings (an answered or ended call keeps none).
    package var offer: SessionDescription?
    /// Pre-connect while ringing (9b).
    package let preconnect: Bool
  }

  /// The callee device that accepted, and on what.
  package struct Acceptance: Sendable, Equatable {
    package let device: Peer
    package let at: Date
    /// The answer to the invite's offer (none when the call was accepted on a pre-connected leg).
    package let answer: SessionDescription?
    /// Accepted on the device's pre-connected leg (9b), not on the invite's offer.
    package let onLeg: Bool
  }

  /// A call's phase, with exactly what holds in it.
  package enum Phase: Equatable {
    /// `legs`: the callee devices with a pre-connected leg, and whether each sent its early
    /// answer; `signals`: the caller's offer, candidates and end-of-candidates so far, as relayed,
    /// for callee devices that connect while it rings (their bytes counted in `signalBytes`).
    case ringing(legs: [String: Bool], signals: [ServerMessage], signalBytes: Int)
    case accepted(Acceptance)
    /// `accepted`: who had answered, kept for the history and `get-call`.
    case ended(EndReason, at: Date, accepted: Acceptance?)

    static let rung = Phase.ringing(legs: [:], signals: [], signalBytes: 0)
  }

  package struct Call {
    package let id: CallID
    package let caller: Identity
    package let calleeId: String
    package let video: Bool
    package let createdAt: Date
    package let ringDeadline: Date
    package var invitation: Invitation
    package var phase: Phase = .rung
    /// When the reconnect grace of the caller's device, or of the answering device, runs out.
    package var callerGraceDeadline: Date?
    package var answererGraceDeadline: Date?
    /// The callee blocks the caller: the call exists for the caller alone, as a call nobody
    /// answers; no callee device hears of it, no push is sent (`silenced`).
    package var blocked = false

    package init(
      id: CallID, caller: Identity, calleeId: String, video: Bool, createdAt: Date, ringDeadline: Date,
      invitation: Invitation
    ) {
      self.id = id
      self.caller = caller
      self.calleeId = calleeId
      self.video = video
      self.createdAt = createdAt
      self.ringDeadline = ringDeadline
      self.invitation = invitation
    }

    package var isRinging: Bool {
      if case .ringing = phase { return true }
      return false
    }
    package var isEnded: Bool {
      if case .ended = phase { return true }
      return false
    }
    /// Who accepted, while the call is connected or after it ended.
    package var acceptance: Acceptance? {
      switch phase {
      case .ringing: nil
      case .accepted(let acceptance): acceptance
      case .ended(_, _, let acceptance): acceptance
      }
    }
    /// The device in the call on the callee's side, while it is connected.
    package var answeringDevice: String? {
      if case .accepted(let acceptance) = phase { return acceptance.device.deviceId }
      return nil
    }
    package var answeredBy: String? { acceptance?.device.deviceId }
    package var answeredAt: Date? { acceptance?.at }
    package var endedAt: Date? {
      if case .ended(_, let at, _) = phase { return at }
      return nil
    }
    package var preconnect: Bool { invitation.preconnect }
    package var acceptedOnLeg: Bool { answeringDevice != nil && acceptance?.onLeg == true }

    /// The pre-connected legs, while it rings (setting them outside the ringing phase does nothing).
    package var legs: [String: Bool] {
      get {
        if case .ringing(let legs, _, _) = phase { return legs }
        return [:]
      }
      set {
        if case .ringing(_, let signals, let bytes) = phase {
          phase = .ringing(legs: newValue, signals: signals, signalBytes: bytes)
        }
      }
    }
    package var callerSignals: [ServerMessage] {
      if case .ringing(_, let signals, _) = phase { return signals }
      return []
    }
    package var callerSignalBytes: Int {
      if case .ringing(_, _, let bytes) = phase { return bytes }
      return 0
    }

    /// Keeps a caller signal for callee devices that connect while it rings.
    package mutating func hold(_ signal: ServerMessage, bytes: Int) {
      guard case .ringing(let legs, let signals, let held) = phase else { return }
      phase = .ringing(legs: legs, signals: signals + [signal], signalBytes: held + bytes)
    }

    /// The invite as relayed to the callee's devices (with the offer while it rings).
    package var inviteMessage: ServerMessage {
      .invite(
        .init(
          callId: id, from: caller.peer, video: video, offer: invitation.offer,
          createdAt: createdAt.millisecondsSince1970, preconnect: invitation.preconnect))
    }

    /// The accept as relayed to the caller's device, while the call is connected: a new session
    /// of that device gets it again (after a restart, the first one may never have reached it).
    package var acceptMessage: ServerMessage? {
      guard case .accepted(let acceptance) = phase else { return nil }
      return .accept(
        .init(callId: id, from: acceptance.device, answer: acceptance.answer, preconnected: acceptance.onLeg))
    }

    package func isCallerDevice(_ who: Identity) -> Bool {
      who.userId == caller.userId && who.deviceId == caller.deviceId
    }
    package func isAnsweringDevice(_ who: Identity) -> Bool {
      who.userId == calleeId && who.deviceId == answeringDevice
    }
    package func involves(user: String) -> Bool { user == caller.userId || (!blocked && user == calleeId) }
  }

  package struct Outcome {
    package var reply: ServerMessage
    package var effects: [CallEffect] = []

    package init(reply: ServerMessage, effects: [CallEffect] = []) {
      self.reply = reply
      self.effects = effects
    }
  }

  package let settings: Settings
  /// `settings.endedRetention` in seconds, read by `pruneEnded` on every relayed candidate: a
  /// `Duration`'s conversion divides 128-bit numbers (~180 instructions).
  private let endedRetentionSeconds: TimeInterval
  package private(set) var calls = CallTable()
  /// Calls not yet ended, by user (caller or callee), for busy and glare checks.
  private var liveCallsByUser: [String: Set<CallID>] = [:]
  private var endedOrder: [(CallID, Date)] = []
  /// Whether a blocked call ever entered `calls` (`silenced` has nothing to drop before one did).
  private var heldBlockedCall = false

  package init(settings: Settings = Settings()) {
    self.settings = settings
    endedRetentionSeconds = settings.endedRetention.seconds
  }

  // MARK: - Requests

  /// `id` is the request id the reply answers (`replyTo`).
  /// `blocked`: for an invite, whether its callee blocks its caller.
  package mutating func handle(
    _ message: ClientMessage, id: String, from who: Identity, now: Date, blocked: Bool = false
  )
    -> Outcome
  {
    var outcome = route(message, id: id, from: who, now: now, blocked: blocked)
    outcome.effects = silenced(outcome.effects)
    return outcome
  }

  private mutating func route(_ message: ClientMessage, id: String, from who: Identity, now: Date, blocked: Bool)
    -> Outcome
  {
    pruneEnded(now: now)
    switch message {
    case .invite(let m): return invite(m, id: id, from: who, now: now, blocked: blocked)
    case .ringing(let m): return ringing(m, id: id, from: who)
    case .accept(let m): return accept(m, id: id, from: who, now: now)
    case .decline(let m): return refuse(m, id: id, reason: .declined, from: who, now: now)
    case .busy(let m): return refuse(m, id: id, reason: .busy, from: who, now: now)
    case .cancel(let m): return hangup(m, id: id, from: who, now: now)
    case .hangup(let m): return hangup(m, id: id, from: who, now: now)
    case .offer(let m):
      if let device = m.toDevice {
        let relayed = ServerMessage.offer(
          .init(callId: m.callId, from: who.peer, sdp: m.sdp, iceRestart: m.iceRestart, leg: true))
        return relayToLeg(id, m.callId, who, device, relayed, opensLeg: true)
      }
      let relayed = ServerMessage.offer(.init(callId: m.callId, from: who.peer, sdp: m.sdp, iceRestart: m.iceRestart))
      // The callee renegotiates (video on or off) once it answered, but never restarts ICE.
      if !m.iceRestart, calls[m.callId]?.isAnsweringDevice(who) == true {
        return relayFromAnswerer(id, m.callId, who, relayed)
      }
      return relayFromCaller(id, m.callId, who, relayed)
    case .answer(let m):
      let relayed = ServerMessage.answer(.init(callId: m.callId, from: who.peer, sdp: m.sdp))
      // The caller answers the callee's renegotiation, once the call is accepted.
      if let call = calls[m.callId], call.isCallerDevice(who), call.answeringDevice != nil, !call.isEnded {
        return Outcome(reply: ack(id, m.callId), effects: [.send(relayed, to: answeringDevice(call))])
      }
      if var call = calls[m.callId], call.isRinging, who.userId == call.calleeId,
        call.legs[who.deviceId] != nil
      {
        call.legs[who.deviceId] = true
        calls[m.callId] = call
        return Outcome(reply: ack(id, m.callId), effects: [.send(relayed, to: callerDevice(call))])
      }
      return relayFromAnswerer(id, m.callId, who, relayed)
    case .candidate(let m):
      if let device = m.toDevice {
        let relayed = ServerMessage.candidate(
          .init(callId: m.callId, from: who.peer, candidate: m.candidate, leg: true))
        return relayToLeg(id, m.callId, who, device, relayed, opensLeg: false)
      }
      let relayed = ServerMessage.candidate(.init(callId: m.callId, from: who.peer, candidate: m.candidate))
      return relayEitherWay(id, m.callId, who, relayed)
    case .endOfCandidates(let m):
      if let device = m.toDevice {
        let relayed = ServerMessage.endOfCandidates(.init(callId: m.callId, from: who.peer, leg: true))
        return relayToLeg(id, m.callId, who, device, relayed, opensLeg: false)
      }
      let relayed = ServerMessage.endOfCandidates(.init(callId: m.callId, from: who.peer))
      return relayEitherWay(id, m.callId, who, relayed)
    case .mediaState(let m):
      return relayEitherWay(id, m.callId, who, .mediaState(.init(callId: m.callId, from: who.peer, camera: m.camera)))
    case .hold(let m):
      // Between the two devices of an accepted call: a call that still rings is not held.
      if let call = calls[m.callId], call.involves(user: who.userId), call.isRinging {
        return invalidState(id, call, who, .deviceInCall("hold"))
      }
      return relayEitherWay(id, m.callId, who, .hold(.init(callId: m.callId, from: who.peer, onHold: m.onHold)))
    case .iceRestartRequest(let m):
      return relayFromAnswerer(id, m.callId, who, .iceRestartRequest(.init(callId: m.callId, from: who.peer)))
    case .getCall(let m):
      guard let state = callState(m.callId, visibleTo: who) else { return notFound(id, m.callId) }
      return Outcome(reply: .ack(.init(replyTo: id, callId: m.callId, call: state)))
    default:
      return Outcome(reply: .error(.init(replyTo: id, code: .internal, message: "not a 1:1 call message")))
    }
  }

  private mutating func invite(_ m: ClientMessage.Invite, id: String, from who: Identity, now: Date, blocked: Bool)
    -> Outcome
  {
    let ack = ServerMessage.ack(.init(replyTo: id, callId: m.callId))
    guard m.to != who.userId else { return error(id, m.callId, .badRequest, "cannot call yourself") }
    if let existing = calls[m.callId] {
      // The same invite re-sent with a new id (a client retry) is acknowledged again.
      if existing.isCallerDevice(who), existing.calleeId == m.to { return Outcome(reply: ack) }
      return error(id, m.callId, .conflict, "callId is already used by another call")
    }
    let placed = liveCalls(of: who.userId).count { calls[$0]?.caller.userId == who.userId }
    guard placed < settings.maxLiveCallsPerUser else {
      return error(
        id, m.callId, .limitExceeded, "at most \(settings.maxLiveCallsPerUser) calls ringing or connected per caller")
    }
    let caller = Identity(userId: who.userId, deviceId: who.deviceId, name: m.callerName ?? who.name)
    var call = Call(
      id: m.callId, caller: caller, calleeId: m.to, video: m.video, createdAt: now,
      ringDeadline: now.addingTimeInterval(settings.ringTimeout.seconds),
      invitation: Invitation(offer: m.offer, preconnect: m.preconnect))
    call.blocked = blocked
    if blocked { heldBlockedCall = true }

    // Busy: the callee is talking already; the callee's devices are not rung.
    if liveCalls(of: m.to).contains(where: { calls[$0]?.answeringDevice != nil }) {
      var outcome = Outcome(reply: ack)
      outcome.effects = finish(
        &call, .busy, now: now, notify: [(.device(userId: who.userId, deviceId: who.deviceId), nil)])
      return outcome
    }

    // Glare: the callee is ringing us right now. The lower callId survives. A blocked invite
    // takes no part: it must not end the blocker's own call.
    if !blocked,
      let otherID = liveCalls(of: m.to).first(where: { id in
        guard let other = calls[id] else { return false }
        return other.isRinging && other.caller.userId == m.to && other.calleeId == who.userId
      }), var other = calls[otherID]
    {
      if CallIDRules.glareSurvivor(otherID, m.callId) == otherID {
        var outcome = Outcome(reply: ack)
        outcome.effects = finish(
          &call, .glare, now: now, replacedBy: otherID,
          notify: [
            (.device(userId: who.userId, deviceId: who.deviceId), nil), (.user(userId: m.to, exceptDevice: nil), nil),
          ])
        return outcome
      }
      var effects = finish(
        &other, .glare, now: now, replacedBy: m.callId,
        notify: [
          (.device(userId: other.caller.userId, deviceId: other.caller.deviceId), nil),
          (.user(userId: other.calleeId, exceptDevice: nil), nil),
        ])
      calls[otherID] = other
      effects += startRinging(call, now: now)
      return Outcome(reply: ack, effects: effects)
    }

    return Outcome(reply: ack, effects: startRinging(call, now: now))
  }

  private mutating func startRinging(_ call: Call, now: Date) -> [CallEffect] {
    calls[call.id] = call
    liveCallsByUser[call.caller.userId, default: []].insert(call.id)
    if !call.blocked { liveCallsByUser[call.calleeId, default: []].insert(call.id) }
    return [
      .persist(.put(call.snapshot)),
      .send(call.inviteMessage, to: .user(userId: call.calleeId, exceptDevice: nil)),
      .schedule(CallTimer(callId: call.id, kind: .ring), after: settings.ringTimeout),
      .external(
        .ringing(callId: call.id, caller: call.caller.peer, calleeId: call.calleeId, video: call.video, createdAt: now)),
    ]
  }

  /// A callee device alerts; with `preconnect`, it asks for a leg of its own (again, if its leg
  /// failed: the caller replaces it). Over the cap, the request is relayed as plain ringing.
  private mutating func ringing(_ m: ClientMessage.Ringing, id: String, from who: Identity) -> Outcome {
    guard var call = calls[m.callId], call.involves(user: who.userId) else { return notFound(id, m.callId) }
    guard who.userId == call.calleeId, call.isRinging else {
      return invalidState(id, call, who, .calleeWhileRinging("ringing"))
    }
    var leg = false
    if m.preconnect, call.preconnect,
      call.legs[who.deviceId] != nil || call.legs.count < settings.maxPreconnectLegs
    {
      call.legs[who.deviceId] = false
      calls[call.id] = call
      leg = true
    }
    return Outcome(
      reply: ack(id, m.callId),
      effects: [
        .send(.ringing(.init(callId: call.id, from: who.peer, preconnect: leg)), to: callerDevice(call))
      ])
  }

  private mutating func accept(_ m: ClientMessage.Accept, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[m.callId], call.involves(user: who.userId) else { return notFound(id, m.callId) }
    if call.isAnsweringDevice(who) { return Outcome(reply: ack(id, m.callId)) }
    guard who.userId == call.calleeId, call.isRinging else {
      return invalidState(id, call, who, .calleeWhileRinging("accept"))
    }
    // 9b: no SDP from a device whose pre-connected leg was answered, which accepts on that leg.
    let onLeg = m.answer == nil && call.legs[who.deviceId] == true
    // protocol.md 7.6: otherwise the answer to the invite's offer, exactly when there was one.
    if !onLeg, (call.invitation.offer != nil) != (m.answer != nil) {
      return error(
        id, m.callId, .badRequest,
        call.invitation.offer != nil
          ? "accept needs the answer to the invite's offer (or an answered pre-connected leg)"
          : "the invite had no offer to answer")
    }
    call.phase = .accepted(Acceptance(device: who.peer, at: now, answer: m.answer, onLeg: onLeg))
    // Only a ringing call's invite carries the offer (late devices get it); the answer has it now.
    call.invitation.offer = nil
    guard let relayed = call.acceptMessage else { return error(id, m.callId, .internal, "accept failed") }
    calls[call.id] = call
    return Outcome(
      reply: ack(id, m.callId),
      effects: [
        .persist(.put(call.snapshot)),
        .cancel(CallTimer(callId: call.id, kind: .ring)),
        .send(relayed, to: callerDevice(call)),
        .send(
          .callEnded(.init(callId: call.id, reason: .answeredElsewhere, from: who.peer)),
          to: .user(userId: call.calleeId, exceptDevice: who.deviceId)),
      ])
  }

  /// decline / busy from a callee device while ringing.
  private mutating func refuse(
    _ m: ClientMessage.CallAction, id: String, reason: EndReason, from who: Identity, now: Date
  )
    -> Outcome
  {
    guard var call = calls[m.callId], call.involves(user: who.userId) else { return notFound(id, m.callId) }
    // protocol.md 7.7: a decline from the device that accepted, after accepting, is a hangup.
    if reason == .declined, call.isAnsweringDevice(who) { return hangup(m, id: id, from: who, now: now) }
    guard who.userId == call.calleeId, call.isRinging else {
      return invalidState(id, call, who, .calleeWhileRinging(reason == .declined ? "decline" : "busy"))
    }
    let effects = finish(
      &call, reason, now: now,
      notify: [
        (callerDevice(call), nil),
        (.user(userId: call.calleeId, exceptDevice: who.deviceId), .declinedElsewhere),
      ], from: who.peer)
    calls[call.id] = call
    return Outcome(reply: ack(id, m.callId), effects: effects)
  }

  /// cancel and hangup: whoever may end the call in its current phase, with the matching reason.
  private mutating func hangup(_ m: ClientMessage.CallAction, id: String, from who: Identity, now: Date) -> Outcome {
    guard var call = calls[m.callId], call.involves(user: who.userId) else { return notFound(id, m.callId) }
    let effects: [CallEffect]
    switch call.phase {
    case .ringing where call.isCallerDevice(who):
      effects = finish(
        &call, .cancelled, now: now, notify: [(.user(userId: call.calleeId, exceptDevice: nil), nil)], from: who.peer)
    case .ringing where who.userId == call.calleeId:
      return refuse(.init(callId: m.callId), id: id, reason: .declined, from: who, now: now)
    case .accepted where call.isCallerDevice(who):
      effects = finish(&call, .hangup, now: now, notify: [(answeringDevice(call), nil)], from: who.peer)
    case .accepted where call.isAnsweringDevice(who):
      effects = finish(&call, .hangup, now: now, notify: [(callerDevice(call), nil)], from: who.peer)
    default:
      return invalidState(id, call, who, .deviceInCall("hangup"))
    }
    calls[call.id] = call
    return Outcome(reply: ack(id, m.callId), effects: effects)
  }

  private mutating func relayFromCaller(_ id: String, _ callId: CallID, _ who: Identity, _ message: ServerMessage)
    -> Outcome
  {
    guard let call = calls[callId], call.involves(user: who.userId) else { return notFound(id, callId) }
    return relayFromCaller(id, callId, who, message, call)
  }

  /// `relayFromCaller` with the call looked up already (it involves `who`): a relayed message
  /// looks its call up once.
  private mutating func relayFromCaller(
    _ id: String, _ callId: CallID, _ who: Identity, _ message: ServerMessage, _ call: consuming Call
  ) -> Outcome {
    guard call.isCallerDevice(who), !call.isEnded else {
      if case .offer(let offer) = message, offer.iceRestart, who.userId == call.calleeId {
        return invalidState(id, call, who, .iceRestartByCallee)
      }
      return invalidState(id, call, who, .callerDevice(message))
    }
    if call.isRinging {
      let size = Self.bufferedSize(message)
      guard call.callerSignals.count < settings.maxBufferedSignals,
        call.callerSignalBytes + size <= settings.maxBufferedSignalBytes
      else {
        return error(id, callId, .limitExceeded, "too much signaling before the call was answered")
      }
      call.hold(message, bytes: size)
      calls[callId] = call
      return Outcome(
        reply: ack(id, callId),
        effects: [
          .persist(.signal(callId, message)), .send(message, to: .user(userId: call.calleeId, exceptDevice: nil)),
        ]
      )
    }
    return Outcome(reply: ack(id, callId), effects: [.send(message, to: answeringDevice(call))])
  }

  /// Caller signaling addressed to one callee device (`toDevice`): while ringing, on that
  /// device's leg (only), never held for other devices; once accepted, to the answering device
  /// if it is that one. An offer opens the leg anew: its answer is awaited again.
  private mutating func relayToLeg(
    _ id: String, _ callId: CallID, _ who: Identity, _ device: String, _ message: ServerMessage, opensLeg: Bool
  ) -> Outcome {
    guard var call = calls[callId], call.involves(user: who.userId) else { return notFound(id, callId) }
    guard call.isCallerDevice(who), !call.isEnded else { return invalidState(id, call, who, .callerDevice(message)) }
    if let answering = call.answeringDevice {
      guard answering == device else { return invalidState(id, call, who, .legNotAnswering(device)) }
      // Accepted on the invite's offer: the device's leg is gone, and what was in flight for
      // it must not reach the connection that carries the call.
      guard call.acceptedOnLeg else { return Outcome(reply: ack(id, callId)) }
      return Outcome(reply: ack(id, callId), effects: [.send(message, to: answeringDevice(call))])
    }
    guard call.legs[device] != nil else {
      return error(id, callId, .invalidState, "no pre-connected leg for device \"\(device)\"")
    }
    if opensLeg {
      call.legs[device] = false
      calls[callId] = call
    }
    return Outcome(
      reply: ack(id, callId), effects: [.send(message, to: .device(userId: call.calleeId, deviceId: device))])
  }

  private func relayFromAnswerer(_ id: String, _ callId: CallID, _ who: Identity, _ message: ServerMessage) -> Outcome {
    guard let call = calls[callId], call.involves(user: who.userId) else { return notFound(id, callId) }
    return relayFromAnswerer(id, callId, who, message, call)
  }

  private func relayFromAnswerer(
    _ id: String, _ callId: CallID, _ who: Identity, _ message: ServerMessage, _ call: Call
  ) -> Outcome {
    guard call.isAnsweringDevice(who) else { return invalidState(id, call, who, .answeringDevice(message)) }
    return Outcome(reply: ack(id, callId), effects: [.send(message, to: callerDevice(call))])
  }

  private mutating func relayEitherWay(_ id: String, _ callId: CallID, _ who: Identity, _ message: ServerMessage)
    -> Outcome
  {
    guard let call = calls[callId], call.involves(user: who.userId) else { return notFound(id, callId) }
    if call.isCallerDevice(who) { return relayFromCaller(id, callId, who, message, call) }
    // A ringing device's candidates on its pre-connected leg.
    if call.isRinging, who.userId == call.calleeId, call.legs[who.deviceId] != nil {
      return Outcome(reply: ack(id, callId), effects: [.send(message, to: callerDevice(call))])
    }
    guard call.isAnsweringDevice(who) else { return invalidState(id, call, who, .deviceInCall(Self.name(of: message))) }
    return relayFromAnswerer(id, callId, who, message, call)
  }

  /// The one device a plain relayed candidate goes to (`plainCandidateTarget`).
  package typealias PlainTarget = (userId: String, deviceId: String)

  /// Where a `candidate` without `toDevice` from `who` goes when relaying it changes nothing in
  /// the call: the one device `handle` would send it to, with an ack as the only reply. Nil for
  /// every other case (a ringing caller's signaling is held and journaled, a blocked call may be
  /// silenced, refusals carry their own errors): those take `handle`, which decides them.
  /// Prunes ended calls first, as `handle` does. The relay's fast lane (the hub's
  /// `RequestPipeline`) asks this instead of building an outcome for every candidate.
  package mutating func plainCandidateTarget(_ callId: CallID, from who: Identity, now: Date) -> PlainTarget? {
    pruneEnded(now: now)
    // Read in place (`CallTable.readLive`): neither the copy a getter makes (every field of the
    // call copied and retained: `memmove` and `swift_retain` were a third of this function's own
    // samples) nor a coroutine frame allocated for every candidate (+2.8 mallocs per relayed
    // message, measured). Nothing is written. Only live calls: an ended one has no plain target.
    return calls.readLive(callId) { Call.plainCandidateTarget(of: &$0, from: who) } ?? nil
  }

  // MARK: - Connections and timers

  /// A device (re)connected. Grace timers stop; a new session (not resumed) of a callee device
  /// gets every call ringing for it, with the caller's signaling so far, in order.
  package mutating func deviceConnected(_ who: Identity, newSession: Bool, now: Date) -> [CallEffect] {
    var effects: [CallEffect] = []
    let device = Recipient.device(userId: who.userId, deviceId: who.deviceId)
    for id in liveCalls(of: who.userId).sorted() {
      guard var call = calls[id] else { continue }
      if call.isCallerDevice(who) || call.isAnsweringDevice(who) {
        effects.append(.cancel(CallTimer(callId: id, kind: .grace(userId: who.userId, deviceId: who.deviceId))))
        let hadGrace = call.callerGraceDeadline != nil || call.answererGraceDeadline != nil
        if call.isCallerDevice(who) { call.callerGraceDeadline = nil } else { call.answererGraceDeadline = nil }
        calls[id] = call
        if hadGrace { effects.append(.persist(.put(call.snapshot))) }
      }
      if newSession, call.isRinging, call.calleeId == who.userId {
        // A new session has lost its leg's connection: it asks again if it still wants one.
        if call.legs.removeValue(forKey: who.deviceId) != nil { calls[id] = call }
        effects.append(.send(call.inviteMessage, to: device))
        effects += call.callerSignals.map { .send($0, to: device) }
      }
      if newSession, call.isCallerDevice(who), let accept = call.acceptMessage {
        effects.append(.send(accept, to: device))
      }
    }
    return effects
  }

  /// What the devices of calls taken over from another node may have missed while no node ran
  /// them (a device that started a new session then reached no owner): the ring, with the
  /// caller's signaling so far, for the callee's devices; the accept for the caller's device.
  /// Sessions that had them drop the copies (`RingReplayFilter`).
  package func catchUp(_ callIds: [CallID]) -> [CallEffect] {
    var effects: [CallEffect] = []
    for id in callIds {
      guard let call = calls[id], !call.isEnded else { continue }
      if call.isRinging, !call.blocked {
        let callee = Recipient.user(userId: call.calleeId, exceptDevice: nil)
        effects.append(.send(call.inviteMessage, to: callee))
        effects += call.callerSignals.map { .send($0, to: callee) }
      }
      if let accept = call.acceptMessage { effects.append(.send(accept, to: callerDevice(call))) }
    }
    return effects
  }

  /// A device's socket dropped: its calls get the grace window, whose deadline is kept.
  package mutating func deviceDisconnected(_ who: Identity, now: Date) -> [CallEffect] {
    var effects: [CallEffect] = []
    for id in liveCalls(of: who.userId).sorted() {
      guard var call = calls[id], call.isCallerDevice(who) || call.isAnsweringDevice(who) else { continue }
      let deadline = now.addingTimeInterval(settings.reconnectGrace.seconds)
      if call.isCallerDevice(who) { call.callerGraceDeadline = deadline } else { call.answererGraceDeadline = deadline }
      calls[id] = call
      effects += [
        .persist(.put(call.snapshot)),
        .schedule(
          CallTimer(callId: id, kind: .grace(userId: who.userId, deviceId: who.deviceId)),
          after: settings.reconnectGrace),
      ]
    }
    return effects
  }

  /// Hands a live call over to another node (a draining node's calls, in a cluster): the call
  /// leaves this router as it is, nothing is persisted or sent, and its timers here are
  /// cancelled. The node that adopts it restores it from the journal (`restore`), deadlines and
  /// all. An ended or unknown call is left alone (no effects).
  package mutating func relinquish(_ callId: CallID) -> [CallEffect] {
    guard let call = calls[callId], !call.isEnded else { return [] }
    calls[callId] = nil
    for user in [call.caller.userId, call.calleeId] {
      liveCallsByUser[user]?.remove(callId)
      if liveCallsByUser[user]?.isEmpty == true { liveCallsByUser[user] = nil }
    }
    var effects: [CallEffect] = [
      .cancel(CallTimer(callId: callId, kind: .ring)),
      .cancel(CallTimer(callId: callId, kind: .grace(userId: call.caller.userId, deviceId: call.caller.deviceId))),
    ]
    if let answerer = call.answeredBy {
      effects.append(.cancel(CallTimer(callId: callId, kind: .grace(userId: call.calleeId, deviceId: answerer))))
    }
    return effects
  }

  /// Calls that were live when the server stopped, reloaded from the journal. No device is
  /// connected yet: each participant device gets `restartGrace`, or what was left of its grace
  /// if its socket had dropped before; a deadline that passed while the server was down ends
  /// the call as of that deadline (`missed` at the ring deadline, `connection-lost` at a grace's).
  package mutating func restore(_ stored: [StoredLiveCall], ended: [RecentlyEndedCall] = [], now: Date) -> [CallEffect]
  {
    // Ended ones first, oldest first, as `pruneEnded` expects them.
    for entry in ended.sorted(by: { ($0.record.endedAt ?? 0) < ($1.record.endedAt ?? 0) }) {
      guard let call = Call(restoring: entry), calls[call.id] == nil, let endedAt = call.endedAt else { continue }
      if call.blocked { heldBlockedCall = true }
      calls[call.id] = call
      endedOrder.append((call.id, endedAt))
    }
    var effects: [CallEffect] = []
    for entry in stored {
      var call = Call(restoring: entry)
      guard calls[call.id] == nil else { continue }
      if call.blocked { heldBlockedCall = true }
      liveCallsByUser[call.caller.userId, default: []].insert(call.id)
      if !call.blocked { liveCallsByUser[call.calleeId, default: []].insert(call.id) }
      let restart = now.addingTimeInterval(settings.restartGrace.seconds)
      let callerGrace = call.callerGraceDeadline ?? restart
      call.callerGraceDeadline = callerGrace
      var timers = [
        (
          CallTimer(callId: call.id, kind: .grace(userId: call.caller.userId, deviceId: call.caller.deviceId)),
          callerGrace
        )
      ]
      if call.isRinging {
        timers.append((CallTimer(callId: call.id, kind: .ring), call.ringDeadline))
      } else if let answerer = call.answeredBy {
        let answererGrace = call.answererGraceDeadline ?? restart
        call.answererGraceDeadline = answererGrace
        timers.append(
          (CallTimer(callId: call.id, kind: .grace(userId: call.calleeId, deviceId: answerer)), answererGrace))
      }
      calls[call.id] = call
      timers.sort { $0.1 < $1.1 }
      if let (first, deadline) = timers.first, deadline <= now {
        effects += timerFired(first, now: deadline)
        continue
      }
      effects.append(.persist(.put(call.snapshot)))
      effects += timers.map {
        .schedule($0.0, after: .milliseconds($0.1.millisecondsSince1970 - now.millisecondsSince1970))
      }
    }
    return silenced(effects)
  }

  package mutating func timerFired(_ timer: CallTimer, now: Date) -> [CallEffect] {
    guard var call = calls[timer.callId], !call.isEnded else { return [] }
    var effects: [CallEffect] = []
    switch timer.kind {
    case .ring:
      guard call.isRinging else { return [] }
      effects = finish(
        &call, .missed, now: now,
        notify: [
          (callerDevice(call), nil), (.user(userId: call.calleeId, exceptDevice: nil), nil),
        ])
    case .grace(let userId, let deviceId):
      let lost = Identity(userId: userId, deviceId: deviceId, name: nil)
      if call.isCallerDevice(lost) {
        let others: Recipient =
          call.isRinging ? .user(userId: call.calleeId, exceptDevice: nil) : answeringDevice(call)
        effects = finish(
          &call, .connectionLost, now: now, notify: [(others, nil), (callerDevice(call), nil)], from: call.caller.peer)
      } else if call.isAnsweringDevice(lost) {
        let peer = Peer(userId: userId, deviceId: deviceId)
        effects = finish(
          &call, .connectionLost, now: now, notify: [(callerDevice(call), nil), (answeringDevice(call), nil)],
          from: peer)
      } else {
        return []
      }
    case .memberRing:
      return []
    }
    calls[call.id] = call
    return silenced(effects)
  }

  // MARK: - Queries

  package func callState(_ callId: CallID, visibleTo who: Identity) -> CallState? {
    guard let call = calls[callId], call.involves(user: who.userId) else { return nil }
    return Self.state(of: call)
  }

  /// The calls ringing or connected (the admin dashboard), oldest first.
  package var liveCalls: [CallState] {
    calls.liveValues.filter { if case .ended = $0.phase { false } else { true } }.map(Self.state(of:))
      .sorted { ($0.createdAt, $0.callId) < ($1.createdAt, $1.callId) }
  }

  private static func state(of call: Call) -> CallState {
    let phase: CallPhase
    var reason: EndReason?
    switch call.phase {
    case .ringing: phase = .ringing
    case .accepted: phase = .accepted
    case .ended(let r, _, _):
      phase = .ended
      reason = r
    }
    return CallState(
      callId: call.id, callerId: call.caller.userId, calleeId: call.calleeId,
      callerDeviceId: call.caller.deviceId, calleeDeviceId: call.answeredBy,
      video: call.video, state: phase, createdAt: call.createdAt.millisecondsSince1970,
      answeredAt: call.answeredAt?.millisecondsSince1970, endedAt: call.endedAt?.millisecondsSince1970,
      endReason: reason)
  }

  // MARK: - Helpers

  /// Ends `call`: notifies each recipient (with its own reason when given), cancels timers and
  /// emits the record. `from` is the peer whose action ended it.
  private mutating func finish(
    _ call: inout Call, _ reason: EndReason, now: Date, replacedBy: CallID? = nil,
    notify: [(Recipient, EndReason?)], from: Peer? = nil
  ) -> [CallEffect] {
    call.phase = .ended(reason, at: now, accepted: call.acceptance)
    // Ended calls are kept for `get-call` and late messages: the outcome, not the SDP.
    call.invitation.offer = nil
    calls[call.id] = call
    liveCallsByUser[call.caller.userId]?.remove(call.id)
    liveCallsByUser[call.calleeId]?.remove(call.id)
    if liveCallsByUser[call.caller.userId]?.isEmpty == true { liveCallsByUser[call.caller.userId] = nil }
    if liveCallsByUser[call.calleeId]?.isEmpty == true { liveCallsByUser[call.calleeId] = nil }
    endedOrder.append((call.id, now))

    var effects: [CallEffect] = [.cancel(CallTimer(callId: call.id, kind: .ring))]
    for (recipient, override) in notify {
      effects.append(
        .send(
          .callEnded(.init(callId: call.id, reason: override ?? reason, from: from, replacedBy: replacedBy)),
          to: recipient))
    }
    let duration = call.answeredAt.map { Int64((now.timeIntervalSince($0) * 1000).rounded()) }
    let record = CallRecord(
      callId: call.id, callerId: call.caller.userId, calleeId: call.calleeId, answeredBy: call.answeredBy,
      video: call.video,
      createdAt: call.createdAt.millisecondsSince1970, answeredAt: call.answeredAt?.millisecondsSince1970,
      endedAt: now.millisecondsSince1970, endReason: reason, durationMs: duration)
    effects += [
      .persist(.ended(record, callerDevice: call.caller.deviceId, blocked: call.blocked)), .external(.ended(record)),
    ]
    return effects
  }

  /// A blocked call's effects without what would tell its callee: no message to a callee
  /// device, no ringing or missed-call push, no call in the callee's counts.
  private func silenced(_ effects: [CallEffect]) -> [CallEffect] {
    // Most calls block nobody: their effects stay as they are, without a filtered copy, and a
    // router that never held a blocked call looks none of them up.
    guard heldBlockedCall else { return effects }
    guard effects.contains(where: { callIdOfSilenceable($0).map { calls[$0]?.blocked == true } ?? false }) else {
      return effects
    }
    return effects.filter { effect in
      switch effect {
      case .send(let message, let recipient):
        guard let id = message.callId, let call = calls[id], call.blocked else { return true }
        switch recipient {
        case .user(let user, _), .device(let user, _): return user != call.calleeId
        }
      case .external(.ringing(let id, _, _, _, _)): return calls[id]?.blocked != true
      case .external(.ended(let record)): return calls[record.callId]?.blocked != true
      default: return true
      }
    }
  }

  /// The call an effect that `silenced` may drop is about.
  private func callIdOfSilenceable(_ effect: CallEffect) -> CallID? {
    switch effect {
    case .send(let message, _): message.callId
    case .external(.ringing(let id, _, _, _, _)): id
    case .external(.ended(let record)): record.callId
    default: nil
    }
  }

  /// Forgets ended calls older than `endedRetention` (their records are in the history).
  package mutating func pruneEnded(now: Date) {
    var drop = 0
    while drop < endedOrder.count, now.timeIntervalSince(endedOrder[drop].1) > endedRetentionSeconds {
      let id = endedOrder[drop].0
      calls.removeValue(forKey: id)
      drop += 1
    }
    if drop > 0 { endedOrder.removeFirst(drop) }
  }

  private func liveCalls(of user: String) -> Set<CallID> { liveCallsByUser[user] ?? [] }

  /// What a held caller message costs: its SDP or candidate line, plus the envelope.
  package static func bufferedSize(_ message: ServerMessage) -> Int {
    switch message {
    case .offer(let m): return m.sdp.utf8.count + 256
    case .candidate(let m): return m.candidate.candidate.utf8.count + 256
    default: return 256
    }
  }
  private func callerDevice(_ call: Call) -> Recipient {
    .device(userId: call.caller.userId, deviceId: call.caller.deviceId)
  }
  private func answeringDevice(_ call: Call) -> Recipient {
    .device(userId: call.calleeId, deviceId: call.answeredBy ?? "")
  }
  private func ack(_ id: String, _ callId: CallID) -> ServerMessage { .ack(.init(replyTo: id, callId: callId)) }
  private func error(_ id: String, _ callId: CallID, _ code: ErrorCode, _ message: String) -> Outcome {
    Outcome(reply: .error(.init(replyTo: id, code: code, message: message, callId: callId)))
  }
  /// Unknown, or not this user's: the same answer either way, so nothing leaks.
  private func notFound(_ id: String, _ callId: CallID) -> Outcome { error(id, callId, .notFound, "no such call") }

  /// The rule a request about a call broke: every `invalid-state` names the one that applies to
  /// this device in this phase (protocol.md 13), never a stock phrase.
  package enum Refusal {
    /// `ringing`, `accept`, `decline`, `busy`: a callee device's, while the call rings.
    case calleeWhileRinging(String)
    /// Signaling only the device that placed the call sends (its offer, or to a leg).
    case callerDevice(ServerMessage)
    /// Signaling only the device that accepted the call sends.
    case answeringDevice(ServerMessage)
    /// What the two devices in the call send, either of them (`hangup`, candidates, `media-state`).
    case deviceInCall(String)
    /// An ICE-restart offer from the callee: the caller restarts ICE, the callee asks (7.15).
    case iceRestartByCallee
    /// Caller signaling for the leg of a device that is not the one that accepted.
    case legNotAnswering(String)
  }

  private func invalidState(_ id: String, _ call: Call, _ who: Identity, _ refusal: Refusal) -> Outcome {
    error(id, call.id, .invalidState, "not allowed now: " + Self.reason(refusal, call, who))
  }

  package static func reason(_ refusal: Refusal, _ call: Call, _ who: Identity) -> String {
    let isCallee = who.userId == call.calleeId
    switch call.phase {
    case .ended(let reason, _, _):
      return "the call has ended (\(reason.rawValue))"
    case .ringing:
      switch refusal {
      case .calleeWhileRinging(let what):
        return "only the callee's devices send \(what)"
      case .iceRestartByCallee, .answeringDevice, .deviceInCall:
        return isCallee
          ? "the call has not been accepted yet: a callee device sends this after its accept, or on its "
            + "pre-connected leg (9b)"
          : "the call has not been accepted yet"
      case .callerDevice(let message):
        return isCallee
          ? "the call has not been accepted yet: a callee device answers the invite with accept"
          : "only the device that placed the call (\(call.caller.deviceId)) sends \(name(of: message))"
      case .legNotAnswering(let device):
        return "no pre-connected leg for device \"\(device)\""
      }
    case .accepted(let acceptance):
      let answering = acceptance.device.deviceId
      if case .iceRestartByCallee = refusal, isCallee, who.deviceId == answering {
        return "only the caller restarts ICE: send ice-restart-request (7.15) to ask for a restart"
      }
      if isCallee, who.deviceId != answering { return "the call is accepted on another device" }
      switch refusal {
      case .calleeWhileRinging(let what):
        return isCallee ? "this device has accepted the call already" : "only the callee's devices send \(what)"
      case .callerDevice(let message):
        return "only the device that placed the call sends \(name(of: message))"
      case .answeringDevice(let message):
        return "only the device that accepted the call sends \(name(of: message))"
      case .deviceInCall(let what):
        return "only the two devices in the call send \(what)"
      case .iceRestartByCallee:
        return "only the caller restarts ICE"
      case .legNotAnswering(let device):
        return "the call was accepted on device \"\(answering)\", not on \"\(device)\""
      }
    }
  }

  /// The wire name of a relayed message, for refusals.
  package static func name(of message: ServerMessage) -> String { message.knownType?.rawValue ?? "this message" }
}

extension CallRouter.Call {
  /// `CallRouter.plainCandidateTarget` for this call (`inout` only to be read in place: it
  /// changes nothing). Each id is compared once, and the phase matched once, for what
  /// `handle` checks through `involves`, `isCallerDevice`, `isRinging`, `legs` and
  /// `isAnsweringDevice` (`CallRouterPlainCandidateTests` holds the two to the same answers).
  fileprivate static func plainCandidateTarget(of call: inout Self, from who: Identity) -> CallRouter.PlainTarget? {
    guard !call.blocked else { return nil }
    if who.userId == call.caller.userId, who.deviceId == call.caller.deviceId {
      // `relayFromCaller`: while ringing it is held for the callee's devices (not plain); once
      // ended it is refused. Connected: to the answering device.
      guard case .accepted(let acceptance) = call.phase else { return nil }
      return (call.calleeId, acceptance.device.deviceId)
    }
    // `relayEitherWay`: only the callee's devices are left (the caller's other devices are
    // refused): a ringing device's candidates on its pre-connected leg, or the answering
    // device's (`relayFromAnswerer`, which relays whatever the call's phase), to the caller.
    guard who.userId == call.calleeId else { return nil }
    switch call.phase {
    case .ringing(let legs, _, _):
      guard legs[who.deviceId] != nil else { return nil }
    case .accepted(let acceptance):
      guard who.deviceId == acceptance.device.deviceId else { return nil }
    case .ended:
      return nil
    }
    return (call.caller.userId, call.caller.deviceId)  // `callerDevice`
  }
}
