import DialtoneCalls
import DialtoneCluster
import DialtoneNet
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
import DialtoneSupport
import Foundation

/// Everything the hub reacts to: socket events from the network thread, timers from the clock,
/// and what the journal, the stores, the SFU and the cluster report back.
///
/// A received message is most events; the cases with large payloads are kept out of line
/// (`indirect`), so an event is the size of a received message's (they made every event 330
/// bytes, copied whole as it moves).
enum HubEvent: Sendable {
  indirect case opened(WebSocketConnection, UpgradeRequest)
  case received(WebSocketConnection, [UInt8], isText: Bool)
  case closed(WebSocketConnection, code: UInt16?)
  /// The oldest hello deadline passed (`SocketGate.helloDeadlinesPassed`).
  case helloDeadlines
  case sessionExpiry(sessionID: String)
  case callTimer(CallTimer)
  indirect case sfu(SFUEvent)
  /// The journal wrote everything up to this ticket.
  case journalCommitted(UInt64)
  /// The store answered whether a call id was ever used (`CallDesk.Decision.needsHistory`): the
  /// requests parked behind the question go on.
  indirect case callIdChecked(CallID, CallDesk.History)
  /// The answer to a request of a session here that was handled elsewhere: a quality report
  /// the store took (or refused), or a request another node's call answered.
  indirect case replyArrived(sessionID: String, requestID: String, reply: ServerMessage)
  /// Another node's device's request about a call that runs here.
  indirect case forwarded(ForwardedRequest)
  /// The answer to a forwarded request that was handled off the hub's thread (a quality report).
  indirect case forwardedAnswered(ForwardedRequest, ServerMessage)
  /// Requests about calls being taken over here waited long enough: they go on.
  case takeOverWaited(CallID)
  indirect case cluster(ClusterEvent)
  /// A session waiting for a message before the ones it holds asks the store for it.
  case gapCheck(sessionID: String)
}

/// The way back onto the hub's thread, for timers and for work that finishes elsewhere (the parts
/// of the hub hold this rather than the hub). Weak: a stopped hub is not kept alive by a timer.
final class HubMailbox: Sendable {
  private struct Weak: Sendable {
    weak var hub: SignalingHub?
  }
  private let target = Locked(Weak())

  func attach(_ hub: SignalingHub) { target.withLock { $0.hub = hub } }

  func post(_ event: HubEvent) { target.current.hub?.deliver(event) }

  /// Posts `event` after `delay` on `clock`.
  func post(_ event: HubEvent, after delay: Duration, on clock: any DialtoneClock) -> any ScheduledAction {
    clock.schedule(after: delay) { [self] in post(event) }
  }
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

extension SignalingHub: ClusterInbox {
  package nonisolated func receive(_ event: ClusterEvent) { deliver(.cluster(event)) }
}
