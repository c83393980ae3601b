/// Rule 3, the ICE recovery of one connection, as a pure value: `disconnected` waits its
/// grace, then restarts; `failed` restarts at once; a failed restart k (`failed`, or its
/// timeout) is retried after `retryBackoff[k-1]`; when the last retry fails, the owner gives up.
/// Each recovering state holds the one timer that moves it on. A 1:1 call's `CallEngineMachine`
/// and each stream of a `GroupCallMachine` hold one; what a restart *is* (an offer, a request
/// to the other side, a fresh connection) and what giving up means are theirs.
public enum IceRecovery: Sendable, Equatable {
  /// Not connected yet (or since a fresh connection replaced the last one).
  case connecting
  case connected
  /// `disconnected`: restart 1 begins when the grace timer fires.
  case disconnected(timer: Int)
  /// Restart `attempt` is running; the timer is its timeout.
  case restarting(attempt: Int, timer: Int)
  /// Restart `attempt` failed; the next begins when the timer fires.
  case retrying(attempt: Int, timer: Int)

  /// How long each step waits.
  public struct Policy: Sendable, Equatable {
    /// How long `disconnected` may last before a restart.
    public var disconnectedGrace: Duration
    /// After a restart fails, the next one starts after these delays; when the restart after
    /// the last delay fails too, the owner gives up.
    public var retryBackoff: [Duration]
    /// A restart that has not reached `connected` after this long counts as failed.
    public var attemptTimeout: Duration

    public init(
      disconnectedGrace: Duration = .seconds(4), retryBackoff: [Duration] = [.seconds(1), .seconds(2), .seconds(3)],
      attemptTimeout: Duration = .seconds(10)
    ) {
      self.disconnectedGrace = disconnectedGrace
      self.retryBackoff = retryBackoff
      self.attemptTimeout = attemptTimeout
    }
  }

  /// What the owner does. Timers are named by tokens the owner hands out (`token`).
  public enum Action: Sendable, Equatable {
    case arm(timer: Int, after: Duration)
    case cancel(timer: Int)
    /// Restart `attempt` begins now (its timeout is armed): the owner restarts the connection.
    case restart(attempt: Int)
    /// The last restart failed. The state is left as it was, so `cancelArmed` still names
    /// the timer to cancel (none when `timerFired`).
    case giveUp(timerFired: Bool)
  }

  /// The restart under way (0: none).
  public var attempt: Int {
    switch self {
    case .connecting, .connected, .disconnected: 0
    case .restarting(let attempt, _), .retrying(let attempt, _): attempt
    }
  }

  /// The armed timer, if any.
  public var timer: Int? {
    switch self {
    case .connecting, .connected: nil
    case .disconnected(let timer), .restarting(_, let timer), .retrying(_, let timer): timer
    }
  }

  /// Cancels the armed timer (the transition that follows replaces it).
  public var cancelArmed: [Action] { timer.map { [.cancel(timer: $0)] } ?? [] }

  /// The connection's state changed.
  public mutating func changed(
    to state: PeerConnectionState, policy: Policy, token: () -> Int
  ) -> [Action] {
    switch state {
    case .new, .checking, .closed:
      return []
    case .connected:
      let cancelled = cancelArmed
      self = .connected
      return cancelled
    case .disconnected:
      // A running restart has its own timeout.
      guard self == .connecting || self == .connected else { return [] }
      let timer = token()
      self = .disconnected(timer: timer)
      return [.arm(timer: timer, after: policy.disconnectedGrace)]
    case .failed:
      return failedOrBegin(timerFired: false, policy: policy, token: token)
    }
  }

  /// A timer fired (one that is no longer armed does nothing).
  public mutating func fired(_ timer: Int, policy: Policy, token: () -> Int) -> [Action] {
    guard self.timer == timer else { return [] }
    switch self {
    case .connecting, .connected: return []
    case .disconnected: return restart(attempt: 1, policy: policy, token: token)
    case .restarting: return failedOrBegin(timerFired: true, policy: policy, token: token)
    case .retrying(let attempt, _): return restart(attempt: attempt + 1, policy: policy, token: token)
    }
  }

  /// Restart `attempt` begins, with its timeout (also when something else than the connection's
  /// state asks for one: a network change, the other side's request).
  public mutating func restart(attempt: Int, policy: Policy, token: () -> Int) -> [Action] {
    let timer = token()
    self = .restarting(attempt: attempt, timer: timer)
    return [.arm(timer: timer, after: policy.attemptTimeout), .restart(attempt: attempt)]
  }

  /// `failed` with no restart in flight restarts at once; a failed restart k is retried after
  /// `retryBackoff[k-1]`; when the last retry fails, the owner gives up.
  private mutating func failedOrBegin(timerFired: Bool, policy: Policy, token: () -> Int) -> [Action] {
    let k = attempt
    if k > policy.retryBackoff.count { return [.giveUp(timerFired: timerFired)] }
    let cancelled = timerFired ? [] : cancelArmed
    if k == 0 { return cancelled + restart(attempt: 1, policy: policy, token: token) }
    let timer = token()
    self = .retrying(attempt: k, timer: timer)
    return cancelled + [.arm(timer: timer, after: policy.retryBackoff[k - 1])]
  }
}
