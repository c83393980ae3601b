import DialtoneProtocol

/// How a `GroupCall` talks to the server: requests whose answer it needs (create, join),
/// and messages it only sends in order (negotiation, leave).
public protocol GroupSignaling: Sendable {
  /// Sends and waits for the `ack` or `error`.
  func request(_ message: ClientMessage) async throws -> ServerMessage
  /// Sends without waiting; messages leave in the order of the calls.
  func send(_ message: ClientMessage) async throws
}

/// `GroupSignaling` over a `SignalingClient` (which re-sends anything unanswered after a reconnect).
public struct SignalingGroupChannel: GroupSignaling {
  public let client: SignalingClient

  public init(client: SignalingClient) { self.client = client }

  public func request(_ message: ClientMessage) async throws -> ServerMessage {
    try await client.request(message)
  }

  public func send(_ message: ClientMessage) async throws {
    _ = try await client.submit(message)
  }
}

/// Why `CallClient.joinRoom` failed.
public enum GroupCallError: Error, Sendable, CustomStringConvertible {
  case refused(ErrorCode, String)
  case unexpectedAnswer(String)

  public var description: String {
    switch self {
    case .refused(let code, let message): return "\(code.rawValue): \(message)"
    case .unexpectedAnswer(let what): return "unexpected answer: \(what)"
    }
  }
}
