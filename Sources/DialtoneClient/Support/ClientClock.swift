import Foundation

/// Time as the client's state machines see it: injected so ICE-restart backoff, answer timeouts
/// and credential refresh are tested with virtual time.
public protocol ClientClock: Sendable {
  var now: Date { get }
  /// Suspends for `seconds` (throws if the task is cancelled).
  func sleep(for seconds: Double) async throws
}

public struct SystemClientClock: ClientClock {
  public init() {}
  public var now: Date { Date() }
  public func sleep(for seconds: Double) async throws { try await Task.sleep(for: .seconds(seconds)) }
}
