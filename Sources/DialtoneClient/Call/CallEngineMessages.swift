import DialtoneProtocol

/// The server's messages about this call. Only 1:1 messages (`ServerMessageType.rules.desk`)
/// and the server's refusals reach the switch: a new group message needs no decision here, a
/// new 1:1 message does (the switch over `ServerMessage.CallMessage` has no `default`).
extension CallEngineMachine {
  mutating func received(_ message: ServerMessage) -> [Effect] {
    guard message.callId == callId else { return [] }
    switch message.routed {
    case .oneToOne(let call): return received(call)
    case .session(.error(let error)): return refused(error)
    case .session, .group, .unknown: return []
    }
  }

  private mutating func received(_ message: ServerMessage.CallMessage) -> [Effect] {
    switch message {
    case .ringing(let m):
      return alerting(m)
    case .accept(let m):
      return remoteAccepted(m)
    case .offer(let m) where m.leg:
      return legOffered(SessionDescription(sdp: m.sdp))
    case .offer(let m):
      return offered(SessionDescription(sdp: m.sdp), iceRestart: m.iceRestart)
    case .answer(let m):
      if case .dialing(var dialing) = phase {
        // Before the accept: a pre-connected leg's early answer.
        let effects = dialing.legs.answered(SessionDescription(sdp: m.sdp), by: m.from.deviceId)
        phase = .dialing(dialing)
        return effects
      }
      return answered(SessionDescription(sdp: m.sdp))
    case .candidate(let m):
      return remoteCandidate(m)
    case .iceRestartRequest:
      // The answerer asks the offerer (us) to restart; one restart at a time.
      guard role == .caller, case .talking(let talking) = phase, talking.recovery.attempt == 0 else { return [] }
      return policyTimerCancel + restart(attempt: 1)
    case .callEnded(let m):
      if m.reason == .glare, let survivor = m.replacedBy, role == .caller {
        return end(.glare(replacedBy: survivor), notify: nil)
      }
      return end(.remote(m.reason), notify: nil)
    case .mediaState(let m):
      return [.remoteCamera(m.camera)]
    case .hold(let m):
      guard m.onHold != remoteIsOnHold else { return [] }
      remoteIsOnHold = m.onHold
      return [.remoteHold(m.onHold)]
    case .invite, .endOfCandidates:
      return []  // an invite makes an engine (`CallClient`); the end of candidates changes nothing here
    }
  }

  /// Only errors for `invite` and `accept` reach the engine.
  private mutating func refused(_ error: ServerMessage.ErrorMessage) -> [Effect] {
    switch phase {
    case .talking(let talking):
      // A callee on its adopted leg sent `accept` without an answer: an error is its refusal.
      guard role == .callee, case .made(let connection) = talking.link, connection.origin == .adoptedLeg else {
        return []
      }
      return acceptAgainOnTheInvitesOffer(error.code)
    case .dialing(let dialing):
      return dialing.alerting ? [] : end(.error("server: \(error.code)"), notify: nil)
    case .idle, .starting, .incoming, .ended:
      return []
    }
  }

  /// The server refused our accept on the leg: the call still rings there, so accept again on
  /// a fresh connection with the answer to the invite's offer (9b), as a device without a leg
  /// would.
  private mutating func acceptAgainOnTheInvitesOffer(_ code: ErrorCode) -> [Effect] {
    guard let offer = inviteOffer, case .talking(var talking) = phase else {
      return end(.error("server: \(code)"), notify: nil)
    }
    let cancelled = policyTimerCancel
    talking.recovery = .connecting
    phase = .talking(talking)
    return cancelled + replaceConnection(applying: PendingOffer(description: offer, then: .accept))
  }

  // MARK: Ringing and accepted (caller)

  private mutating func alerting(_ m: ServerMessage.Ringing) -> [Effect] {
    guard case .dialing(var dialing) = phase else { return [] }
    dialing.alerting = true
    var effects: [Effect] = []
    if m.preconnect, preconnects {
      effects = dialing.legs.requested(by: m.from.deviceId, generation: nextGeneration())
    }
    phase = .dialing(dialing)
    return effects
  }

  private mutating func remoteAccepted(_ m: ServerMessage.Accept) -> [Effect] {
    guard case .dialing(var dialing) = phase else { return [] }
    remotePeer = m.from
    if m.preconnected, let adopted = adoptLeg(from: &dialing.legs, device: m.from.deviceId) {
      return holdNotice + adopted
    }
    let closed = dialing.legs.closeAll() + holdNotice
    phase = .talking(Talking(link: .made(dialing.connection), recovery: .connecting))
    guard let answer = m.answer else { return closed }
    return closed + applyRemote(answer, .answer, then: .settle)
  }

  // MARK: Candidates

  private mutating func remoteCandidate(_ m: ServerMessage.Candidate) -> [Effect] {
    switch phase {
    case .incoming(var incoming) where m.leg:
      let effects = incoming.legs.remoteCandidate(m.candidate, device: nil)
      phase = .incoming(incoming)
      return effects
    case .talking(let talking) where m.leg:
      // Still in flight when the call was accepted: the current connection's only if it is that leg.
      guard case .made(let connection) = talking.link, connection.origin == .adoptedLeg else { return [] }
      return mainCandidate(m.candidate)
    case .dialing(var dialing) where dialing.legs.leg(forDevice: m.from.deviceId) != nil:
      // A ringing callee device trickles on its leg.
      let effects = dialing.legs.remoteCandidate(m.candidate, device: m.from.deviceId)
      phase = .dialing(dialing)
      return effects
    case _ where m.leg:
      return []
    case .idle, .starting, .dialing, .incoming, .talking, .ended:
      return mainCandidate(m.candidate)
    }
  }

  // MARK: Pre-connect (9b)

  /// Callee: the caller offered a leg. After the accept a leg offer is moot: the call goes on
  /// on the invite's offer or on the leg already adopted, never on a new one.
  private mutating func legOffered(_ offer: SessionDescription) -> [Effect] {
    guard case .incoming(var incoming) = phase, preconnects else { return [] }
    let effects = incoming.legs.offered(offer, generation: nextGeneration())
    phase = .incoming(incoming)
    return effects
  }

  /// The call goes on on the leg of `device` (the callee's leg: nil), already negotiated: it
  /// becomes the current connection, its media released, and the others close. Nil (and the
  /// legs untouched) when there is no such leg able to carry the call.
  mutating func adoptLeg(from legs: inout PreconnectLegs, device: String?) -> [Effect]? {
    guard let (leg, closed) = legs.adopt(device: device) else { return nil }
    var effects = closed + [.adoptLeg(generation: leg.generation)]
    if let direction = leg.remoteVideo {
      remoteReceivesVideo = direction.receives
      if direction.sends != remoteSendsVideo {
        remoteSendsVideo = direction.sends
        effects.append(.remoteVideo(direction.sends))
      }
    }
    // A caller's leg may be adopted while the device's early answer is still being applied.
    let connection = Connection(
      generation: leg.generation, canRestartIce: leg.canRestartIce, origin: .adoptedLeg,
      negotiation: leg.remoteReady ? .stable : .applying(video: nil, then: .settle),
      candidates: leg.remoteReady ? .flowing : .waiting(leg.pendingRemote),
      sendsVideo: sendsVideo && remoteReceivesVideo)
    phase = .talking(Talking(link: .made(connection), recovery: leg.connected ? .connected : .connecting))
    effects += [.releaseMedia(generation: leg.generation), .setAudio(generation: leg.generation, audible)]
    // Answered: this device's addresses may now reach the caller, and a direct path may
    // replace the relay where the connection can change its policy in place.
    if leg.iceTransportPolicy == .relay { effects.append(.setIceTransportPolicy(generation: leg.generation, .all)) }
    return effects + cameraEffect()
  }
}
