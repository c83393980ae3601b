import DialtoneProtocol

/// `CallSignaling` over a `SignalingClient`. Requests are queued in order and not awaited, so
/// trickled candidates leave back to back instead of one per round trip; the client re-sends
/// anything unanswered after a reconnect. Only the answers that decide a call (`invite`,
/// `accept`) are watched: an `error` for them goes to `rejected`.
public struct SignalingCallChannel: CallSignaling {
  public let client: SignalingClient
  private let rejected: @Sendable (ServerMessage.ErrorMessage) async -> Void

  public init(
    client: SignalingClient, rejected: @escaping @Sendable (ServerMessage.ErrorMessage) async -> Void = { _ in }
  ) {
    self.client = client
    self.rejected = rejected
  }

  public func send(_ message: ClientMessage) async throws {
    let reply = try await client.submit(message)
    guard message.type == .invite || message.type == .accept, let callId = message.callId else { return }
    let rejected = self.rejected
    Task {
      guard case .error(var error) = try? await reply.value else { return }
      if error.callId == nil { error.callId = callId }
      await rejected(error)
    }
  }
}
