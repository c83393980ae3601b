import DialtoneNet
import DialtoneProtocol
import Foundation

/// Everything the hub reacts to: socket events from the network thread and timers from the clock.
enum HubEvent: Sendable {
  case opened(WebSocketConnection, UpgradeRequest)
  case received(WebSocketConnection, [UInt8], isText: Bool)
  case closed(WebSocketConnection, code: UInt16?)
  case helloDeadline(socketID: UInt64)
  case sessionExpiry(sessionID: String)
  case callTimer(CallTimer)
  case sfu(SFUEvent)
  /// The journal wrote everything up to this ticket.
  case journalCommitted(UInt64)
  /// The answer to a request of a session here that was handled elsewhere: a quality report
  /// the store took (or refused), or a request another node's call answered.
  case replyArrived(sessionID: String, requestID: String, reply: ServerMessage)
  /// Another node's device's request about a call that runs here.
  case forwarded(ForwardedRequest)
  /// Letters from other nodes of a cluster, in the order they were sent.
  case cluster([ClusterLetter])
  /// Live calls this node took over (their node died or handed them over), from the journal.
  case adopt([StoredLiveCall])
}

/// Adapts `DialtoneNet`'s callbacks (on the network thread, which is the hub's executor) to the hub.
struct SocketEventBridge: WebSocketHandler {
  let hub: SignalingHub

  func webSocketOpened(_ connection: WebSocketConnection, request: UpgradeRequest) {
    hub.deliver(.opened(connection, request))
  }
  func webSocketReceived(_ connection: WebSocketConnection, message: [UInt8], isText: Bool) {
    hub.deliver(.received(connection, message, isText: isText))
  }
  func webSocketClosed(_ connection: WebSocketConnection, code: UInt16?) {
    hub.deliver(.closed(connection, code: code))
  }
}
