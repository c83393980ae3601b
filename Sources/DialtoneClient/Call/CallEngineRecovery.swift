import DialtoneProtocol

/// The ICE policy (rule 3) of an accepted call: `disconnected` waits its grace, then restarts;
/// `failed` restarts at once; a failed restart k is retried after `retryBackoff[k-1]`; when the
/// last retry fails, the call ends. The one timer lives in `Recovery`.
extension CallEngineMachine {
  mutating func connectionStateChanged(_ newState: PeerConnectionState) -> [Effect] {
    // Before the accept the connection's states drive nothing (legs have their own).
    guard case .talking(var talking) = phase else { return [] }
    switch newState {
    case .new, .checking, .closed:
      return []
    case .connected:
      let cancelled = policyTimerCancel
      talking.recovery = .connected
      phase = .talking(talking)
      return cancelled + renegotiateIfNeeded()
    case .disconnected:
      // A running restart has its own timeout.
      guard talking.recovery == .connecting || talking.recovery == .connected else { return [] }
      let token = nextTimerToken()
      talking.recovery = .disconnected(timer: token)
      phase = .talking(talking)
      return [.arm(.policy(token: token), after: policy.disconnectedGrace)]
    case .failed:
      return restartFailedOrBegin(timerFired: false)
    }
  }

  mutating func policyTimerFired(_ token: Int) -> [Effect] {
    guard case .talking(let talking) = phase, talking.recovery.timer == token else { return [] }
    switch talking.recovery {
    case .connecting, .connected: return []
    case .disconnected: return restart(attempt: 1)
    case .restarting: return restartFailedOrBegin(timerFired: true)
    case .retrying(let attempt, _): return restart(attempt: attempt + 1)
    }
  }

  /// `failed` with no restart in flight restarts at once; a failed restart k (`failed`, or its
  /// timeout) is retried after `retryBackoff[k-1]`; when the last retry fails, the call ends.
  private mutating func restartFailedOrBegin(timerFired: Bool) -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    let k = talking.recovery.attempt
    if k > policy.retryBackoff.count {
      return end(.iceFailed, notify: .hangup(.init(callId: callId)), policyTimerFired: timerFired)
    }
    let cancelled = timerFired ? [] : policyTimerCancel
    if k == 0 { return cancelled + restart(attempt: 1) }
    let token = nextTimerToken()
    talking.recovery = .retrying(attempt: k, timer: token)
    phase = .talking(talking)
    return cancelled + [.arm(.policy(token: token), after: policy.retryBackoff[k - 1])]
  }

  /// Restart k begins, with its timeout. The callee asks the caller; the caller offers again,
  /// on a fresh connection if this one cannot restart ICE.
  mutating func restart(attempt k: Int) -> [Effect] {
    guard case .talking(var talking) = phase else { return [] }
    let token = nextTimerToken()
    talking.recovery = .restarting(attempt: k, timer: token)
    phase = .talking(talking)
    let timeout: [Effect] = [.arm(.policy(token: token), after: policy.attemptTimeout)]
    switch role {
    case .callee:
      // The answerer never restarts itself: it asks the offerer.
      return timeout + [.send(.iceRestartRequest(.init(callId: callId)))]
    case .caller:
      guard let connection else { return timeout }  // a fresh one is being made: it offers when made
      if !connection.canRestartIce { return timeout + replaceConnection(applying: nil) }
      return timeout + makeOffer(.restartOffer, iceRestart: true)
    }
  }

  /// Cancels the armed policy timer (the transition that follows replaces `Recovery`).
  var policyTimerCancel: [Effect] {
    guard case .talking(let talking) = phase, let token = talking.recovery.timer else { return [] }
    return [.cancel(.policy(token: token))]
  }
}
