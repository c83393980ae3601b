import DialtoneProtocol

/// Offer/answer on the current connection (rule 2, 9a): each step is a `Negotiation` case, the
/// effects carry the connection's generation, and an offer of the other side that arrives
/// mid-exchange waits for it.
extension CallEngineMachine {
  mutating func makeOffer(_ purpose: Purpose, iceRestart: Bool) -> [Effect] {
    guard var connection else { return [] }
    connection.negotiation = .creating(purpose)
    // A renegotiation's video counts once its answer is applied; any other offer says it now.
    if case .renegotiate = purpose {} else { connection.sendsVideo = sendsVideo }
    self.connection = connection
    // Every offer takes the other side's video: whether it sends is the other side's choice
    // (an audio call's section is recvonly, answered inactive).
    return [
      .setVideoDirection(generation: connection.generation, MediaDirection(sends: sendsVideo, receives: true)),
      .createOffer(generation: connection.generation, iceRestart: iceRestart),
    ]
  }

  /// An answer takes whatever video the offer sends (the stack intersects the directions).
  mutating func makeAnswer(_ purpose: Purpose) -> [Effect] {
    guard var connection else { return [] }
    connection.negotiation = .creating(purpose)
    connection.sendsVideo = sendsVideo && remoteReceivesVideo
    self.connection = connection
    return [
      .setVideoDirection(generation: connection.generation, MediaDirection(sends: sendsVideo, receives: true)),
      .createAnswer(generation: connection.generation),
    ]
  }

  /// `createOffer` or `createAnswer` returned.
  mutating func created(_ description: SessionDescription, _ kind: SessionDescriptionKind) -> [Effect] {
    guard var connection, case .creating(let purpose) = connection.negotiation else { return [] }
    if case .renegotiate(let sends) = purpose {
      // Sent before it is set (see `Negotiation.renegotiating`).
      connection.negotiation = .renegotiating(offer: description, sends: sends)
      self.connection = connection
      return [.send(.offer(.init(callId: callId, sdp: description.sdp, iceRestart: false)))]
    }
    if kind == .offer { connection.gathering = .running([]) }  // a restart gathers a new generation
    connection.negotiation = .setting(purpose, description)
    self.connection = connection
    return [.setLocal(generation: connection.generation, description, kind)]
  }

  mutating func localDescriptionSet() -> [Effect] {
    guard var connection else { return [] }
    switch connection.negotiation {
    case .renegotiated(_, let answer, let sends):
      connection.sendsVideo = sends
      self.connection = connection
      return applyRemote(answer, .answer, then: .settle) + cameraEffect()
    case .setting(let purpose, let description):
      // Remote candidates of this generation wait for the answer to this offer.
      if purpose == .invite || purpose == .restartOffer { connection.candidates.hold() }
      guard !policy.trickle else {
        self.connection = connection
        return sendLocal(purpose, description)
      }
      if case .done(let gathered) = connection.gathering {
        self.connection = connection
        return sendLocal(purpose, Self.embedding(gathered, in: description))
      }
      connection.negotiation = .gathering(purpose, description)
      self.connection = connection
      return [.arm(.gathering(generation: connection.generation), after: policy.gatheringTimeout)]
    case .none, .stable, .offerApplied, .creating, .gathering, .awaitingAnswer, .renegotiating, .applying:
      return []
    }
  }

  /// Our description, set (and without trickle, gathered), goes out in the message its purpose
  /// calls for.
  private mutating func sendLocal(_ purpose: Purpose, _ description: SessionDescription) -> [Effect] {
    guard var connection else { return [] }
    switch purpose {
    case .invite:
      connection.negotiation = .awaitingAnswer(restart: false)
      self.connection = connection
      return [
        .send(
          .invite(
            .init(callId: callId, to: remoteUserId ?? "", video: video, offer: description, preconnect: preconnects)))
      ] + releaseHeldCandidates()
    case .restartOffer:
      connection.negotiation = .awaitingAnswer(restart: true)
      self.connection = connection
      return [.send(.offer(.init(callId: callId, sdp: description.sdp, iceRestart: true)))] + releaseHeldCandidates()
    case .accept:
      connection.negotiation = .stable
      self.connection = connection
      let accepted = acceptance(answer: description)
      return accepted + releaseHeldCandidates() + cameraEffect() + settled()
    case .answer:
      connection.negotiation = .stable
      self.connection = connection
      return [.send(.answer(.init(callId: callId, sdp: description.sdp)))] + releaseHeldCandidates() + cameraEffect()
        + settled()
    case .renegotiate:
      return []  // never set before it is sent
    }
  }

  /// A failed offer or answer ends the call with the request its purpose calls for.
  mutating func localDescriptionFailed(_ why: String) -> [Effect] {
    let purpose: Purpose
    switch connection?.negotiation {
    case .creating(let making)?, .setting(let making, _)?: purpose = making
    case .renegotiated?: purpose = .renegotiate(sends: sendsVideo)
    case .none?, .stable?, .offerApplied?, .gathering?, .awaitingAnswer?, .renegotiating?, .applying?, nil:
      return []
    }
    switch purpose {
    case .invite: return end(.error("offer: \(why)"), notify: .cancel(.init(callId: callId)))
    case .restartOffer: return end(.error("restart offer: \(why)"), notify: .hangup(.init(callId: callId)))
    case .accept: return end(.error("answer: \(why)"), notify: .decline(.init(callId: callId)))
    case .answer, .renegotiate: return end(.error("answer: \(why)"), notify: .hangup(.init(callId: callId)))
    }
  }

  /// setRemoteDescription; the buffered candidates follow it in arrival order once it is set.
  mutating func applyRemote(_ description: SessionDescription, _ kind: SessionDescriptionKind, then next: AfterRemote)
    -> [Effect]
  {
    guard var connection else { return [] }
    connection.negotiation = .applying(video: MediaDirection.video(in: description.sdp), then: next)
    connection.candidates.hold()
    self.connection = connection
    return [.setRemote(generation: connection.generation, description, kind)]
  }

  mutating func remoteDescriptionSet() -> [Effect] {
    guard var connection, case .applying(let video, let next) = connection.negotiation else { return [] }
    var effects: [Effect] = []
    if case .waiting(let buffered) = connection.candidates {
      effects = buffered.map { .addCandidate(generation: connection.generation, $0) }
    }
    connection.candidates = .flowing
    if let video {
      remoteReceivesVideo = video.receives
      if video.sends != remoteSendsVideo {
        remoteSendsVideo = video.sends
        effects.append(.remoteVideo(video.sends))
      }
    }
    switch next {
    case .settle:
      // An answer (or the caller's first one, in accept) completes a negotiation.
      connection.negotiation = .stable
      self.connection = connection
      return effects + settled()
    case .waitForUser:
      connection.negotiation = .offerApplied
      self.connection = connection
      return effects
    case .answer:
      self.connection = connection
      return effects + makeAnswer(.answer)
    case .accept:
      self.connection = connection
      return effects + makeAnswer(.accept)
    }
  }

  /// A negotiation just completed: the offer that waited for it, or a renegotiation of ours.
  mutating func settled() -> [Effect] {
    guard var connection, let queued = connection.queuedOffer else { return renegotiateIfNeeded() }
    connection.queuedOffer = nil
    self.connection = connection
    return offered(queued.description, iceRestart: queued.iceRestart)
  }

  /// Renegotiates when what we send differs from what was last negotiated, once nothing else
  /// is being negotiated (an ICE restart, an answer, the other side's offer).
  mutating func renegotiateIfNeeded() -> [Effect] {
    guard case .talking(let talking) = phase, talking.recovery.attempt == 0, case .made(let connection) = talking.link,
      connection.negotiation == .stable, connection.queuedOffer == nil, sendsVideo != connection.sendsVideo
    else { return [] }
    guard connection.canRestartIce else { return renegotiateByRestart() }
    return makeOffer(.renegotiate(sends: sendsVideo), iceRestart: false)
  }

  /// A connection that cannot change a negotiated direction in place (webrtcbin 1.22) cannot
  /// restart ICE either: the caller renegotiates on a fresh connection, as after a lost path;
  /// the callee asks it to (its answer from a fresh connection then carries its change).
  mutating func renegotiateByRestart() -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    switch role {
    case .caller:
      guard talking.recovery.attempt == 0, connection?.negotiation != .awaitingAnswer(restart: true) else { return [] }
      return policyTimerCancel + restart(attempt: 1)
    case .callee:
      guard !talking.askedForRestart else { return [] }
      talking.askedForRestart = true
      phase = .talking(talking)
      return [.send(.iceRestartRequest(.init(callId: callId)))]
    }
  }

  // MARK: The other side's offer

  /// An offer of the other side (not a leg's). Glare: the caller's offer wins, so the caller
  /// drops the callee's while an offer of its own is out and the callee drops its own
  /// renegotiation (never applied) to answer the caller's; an offer that comes while a
  /// negotiation completes waits for it.
  mutating func offered(_ offer: SessionDescription, iceRestart: Bool) -> [Effect] {
    switch phase {
    case .idle(let kept, let early):
      // The initial offer, when the invite had none: kept for the first connection.
      if role == .callee, kept == nil { phase = .idle(offer: offer, candidates: early) }
      return []
    case .starting(var making):
      if role == .callee, making.offer == nil {
        making.offer = PendingOffer(description: offer, then: .waitForUser)
        phase = .starting(making)
      }
      return []
    case .dialing, .ended:
      return []  // the caller takes no offer before the accept
    case .incoming(let incoming):
      guard incoming.connection.negotiation == .none else { return [] }
      return applyRemote(offer, .offer, then: .waitForUser)
    case .talking(var talking):
      talking.askedForRestart = false
      switch talking.link {
      case .making(var making):
        // Kept for the connection being made (a newer offer replaces an older one).
        guard role == .callee else { return [] }
        making.offer = PendingOffer(description: offer, then: making.offer?.then ?? .answer)
        talking.link = .making(making)
        phase = .talking(talking)
        return []
      case .made(var connection):
        phase = .talking(talking)
        if role == .callee, iceRestart, !connection.canRestartIce {
          // The answerer MAY answer from a fresh peer connection (protocol.md 9, ICE restart).
          return replaceConnection(applying: PendingOffer(description: offer, then: .answer))
        }
        switch (role, connection.negotiation) {
        case (.caller, .creating(.renegotiate)), (.caller, .renegotiating), (.caller, .awaitingAnswer),
          (.caller, .creating(.restartOffer)), (.caller, .setting(.restartOffer, _)),
          (.caller, .gathering(.restartOffer, _)):
          return []  // glare: an offer of ours is out, and the callee answers it first
        case (.callee, .creating(.renegotiate)), (.callee, .renegotiating):
          connection.negotiation = .stable  // glare: ours was never applied; answer theirs, then offer again
          self.connection = connection
        case (_, .renegotiated), (_, .applying), (_, .creating), (_, .setting), (_, .gathering), (_, .offerApplied),
          (.callee, .awaitingAnswer):
          connection.queuedOffer = QueuedOffer(description: offer, iceRestart: iceRestart)
          self.connection = connection
          return []
        case (_, .none), (_, .stable):
          break
        }
        if !iceRestart, !connection.canRestartIce, connection.negotiation == .stable {
          // webrtcbin cannot change a negotiated direction in place: the change is made again by
          // an ICE restart on fresh connections (ours as the caller, or the one we ask for).
          return renegotiateByRestart()
        }
        if iceRestart {
          connection.gathering = .running([])
          self.connection = connection
        }
        return applyRemote(offer, .offer, then: .answer)
      }
    }
  }

  /// Our renegotiation's answer, or the callee's answer to a restart offer.
  mutating func answered(_ answer: SessionDescription) -> [Effect] {
    guard case .talking = phase, var connection else { return [] }
    switch connection.negotiation {
    case .renegotiating(let offer, let sends):
      connection.negotiation = .renegotiated(offer: offer, answer: answer, sends: sends)
      self.connection = connection
      return [.setLocal(generation: connection.generation, offer, .offer)]
    case .awaitingAnswer(restart: true) where role == .caller:
      return applyRemote(answer, .answer, then: .settle)
    case .none, .stable, .offerApplied, .creating, .setting, .gathering, .awaitingAnswer, .renegotiated, .applying:
      return []  // nothing of ours awaits an answer
    }
  }

  /// A remote candidate for the current connection: in at once, or kept until the remote
  /// description of its generation is set (rule 2).
  mutating func mainCandidate(_ candidate: IceCandidate) -> [Effect] {
    switch phase {
    case .idle(let offer, let early):
      phase = .idle(offer: offer, candidates: early + [candidate])
      return []
    case .starting(var making):
      making.candidates.append(candidate)
      phase = .starting(making)
      return []
    case .talking(var talking):
      guard case .making(var making) = talking.link else { break }
      making.candidates.append(candidate)
      talking.link = .making(making)
      phase = .talking(talking)
      return []
    case .dialing, .incoming, .ended:
      break
    }
    guard var connection else { return [] }
    guard case .waiting(let buffered) = connection.candidates else {
      return [.addCandidate(generation: connection.generation, candidate)]
    }
    connection.candidates = .waiting(buffered + [candidate])
    self.connection = connection
    return []
  }

  /// A fresh connection replaces the current one (the old one's candidates are stale), with
  /// the offer to apply on it.
  mutating func replaceConnection(applying offer: PendingOffer?) -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    let making = Making(generation: nextGeneration(), offer: offer)
    talking.link = .making(making)
    phase = .talking(talking)
    return [.replaceConnection(generation: making.generation)]
  }

  // MARK: Candidates we gather

  mutating func localCandidate(_ candidate: IceCandidate?) -> [Effect] {
    guard policy.trickle else {
      guard let candidate else { return finishGathering() }
      guard var connection else { return [] }
      if case .running(let gathered) = connection.gathering { connection.gathering = .running(gathered + [candidate]) }
      self.connection = connection
      return []
    }
    if var connection, Self.describing(connection.negotiation) {
      if connection.heldLocalCandidates.count < 256 { connection.heldLocalCandidates.append(candidate) }
      self.connection = connection
      return []
    }
    return [Self.trickled(candidate, callId)]
  }

  private static func trickled(_ candidate: IceCandidate?, _ callId: CallID) -> Effect {
    if let candidate { return .send(.candidate(.init(callId: callId, candidate: candidate))) }
    return .send(.endOfCandidates(.init(callId: callId)))
  }

  /// Our invite, accept, restart offer or answer is being made or set, not sent yet.
  private static func describing(_ negotiation: Negotiation) -> Bool {
    switch negotiation {
    case .creating(let purpose), .setting(let purpose, _):
      if case .renegotiate = purpose { return false }
      return true
    case .none, .stable, .offerApplied, .gathering, .awaitingAnswer, .renegotiating, .renegotiated, .applying:
      return false
    }
  }

  /// The candidates held while our description was made, now that it is out.
  private mutating func releaseHeldCandidates() -> [Effect] {
    guard var connection, !connection.heldLocalCandidates.isEmpty else { return [] }
    let held = connection.heldLocalCandidates
    connection.heldLocalCandidates = []
    self.connection = connection
    return held.map { Self.trickled($0, callId) }
  }

  /// Without trickle: gathering ended (or its timer fired); a description that waited for it
  /// goes out with every candidate in it.
  mutating func finishGathering() -> [Effect] {
    guard var connection else { return [] }
    connection.gathering = .done(connection.gathering.candidates)
    self.connection = connection
    guard case .gathering(let purpose, let description) = connection.negotiation else { return [] }
    return [.cancel(.gathering(generation: connection.generation))]
      + sendLocal(purpose, Self.embedding(connection.gathering.candidates, in: description))
  }

  static func embedding(_ gathered: [IceCandidate], in description: SessionDescription) -> SessionDescription {
    SessionDescription(sdp: SDPCandidates.embedding(gathered, in: description.sdp))
  }
}
