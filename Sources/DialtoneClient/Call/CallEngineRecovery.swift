import DialtoneProtocol

/// The ICE policy (rule 3) of an accepted call, `IceRecovery`'s rules with the call's
/// meaning: a restart is the caller's offer (on a fresh connection if this one cannot restart
/// ICE) or the callee's `ice-restart-request`; giving up ends the call (`iceFailed`).
extension CallEngineMachine {
  mutating func connectionStateChanged(_ newState: PeerConnectionState) -> [Effect] {
    // Before the accept the connection's states drive nothing (legs have their own).
    guard case .talking(var talking) = phase else { return [] }
    let actions = talking.recovery.changed(to: newState, policy: policy.recovery) { nextTimerToken() }
    phase = .talking(talking)
    return perform(actions) + (newState == .connected ? renegotiateIfNeeded() : [])
  }

  mutating func policyTimerFired(_ token: Int) -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    let actions = talking.recovery.fired(token, policy: policy.recovery) { nextTimerToken() }
    phase = .talking(talking)
    return perform(actions)
  }

  /// Restart k begins, with its timeout. The callee asks the caller; the caller offers again,
  /// on a fresh connection if this one cannot restart ICE.
  mutating func restart(attempt k: Int) -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    let actions = talking.recovery.restart(attempt: k, policy: policy.recovery) { nextTimerToken() }
    phase = .talking(talking)
    return perform(actions)
  }

  private mutating func perform(_ actions: [IceRecovery.Action]) -> [Effect] {
    var effects: [Effect] = []
    for action in actions {
      switch action {
      case .arm(let token, let delay): effects.append(.arm(.policy(token: token), after: delay))
      case .cancel(let token): effects.append(.cancel(.policy(token: token)))
      case .restart: effects += restartNow()
      case .giveUp(let timerFired):
        effects += end(.iceFailed, notify: .hangup(.init(callId: callId)), policyTimerFired: timerFired)
      }
    }
    return effects
  }

  /// What a restart does for this side of the call (its timeout is armed already).
  private mutating func restartNow() -> [Effect] {
    switch role {
    case .callee:
      // The answerer never restarts itself: it asks the offerer.
      return [.send(.iceRestartRequest(.init(callId: callId)))]
    case .caller:
      guard let connection else { return [] }  // a fresh one is being made: it offers when made
      if !connection.canRestartIce { return replaceConnection(applying: nil) }
      return makeOffer(.restartOffer, iceRestart: true)
    }
  }

  /// Cancels the armed policy timer (the transition that follows replaces `Recovery`).
  var policyTimerCancel: [Effect] {
    guard case .talking(let talking) = phase, let token = talking.recovery.timer else { return [] }
    return [.cancel(.policy(token: token))]
  }
}

extension CallEngine.Policy {
  /// Rule 3's figures.
  public var recovery: IceRecovery.Policy {
    IceRecovery.Policy(
      disconnectedGrace: disconnectedGrace, retryBackoff: retryBackoff, attemptTimeout: attemptTimeout)
  }
}
