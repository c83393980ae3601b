import DialtoneProtocol

/// How a `CallEngine` talks to the server. The app wires it to `SignalingClient.submit`,
/// which gives each message its request id. The engine calls `send` from one task, in order.
public protocol CallSignaling: Sendable {
  func send(_ message: ClientMessage) async throws
}
