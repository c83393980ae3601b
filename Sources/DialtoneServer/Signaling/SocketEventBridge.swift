import DialtoneNet
import Foundation

/// Everything the hub reacts to, in one ordered stream: socket events from the network thread and
/// timers from the clock. One stream keeps per-socket order without a task per connection.
enum HubEvent: Sendable {
  case opened(WebSocketConnection, UpgradeRequest)
  case received(WebSocketConnection, [UInt8], isText: Bool)
  case closed(WebSocketConnection, code: UInt16?)
  case helloDeadline(socketID: UInt64)
  case sessionExpiry(sessionID: String)
  case callTimer(CallTimer)
}

/// Adapts `DialtoneNet`'s callbacks (network thread) to the hub's event stream.
struct SocketEventBridge: WebSocketHandler {
  let sink: AsyncStream<HubEvent>.Continuation

  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {
    sink.yield(.opened(connection, request))
  }
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    sink.yield(.received(connection, message, isText: isText))
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {
    sink.yield(.closed(connection, code: code))
  }
}
