import DialtoneCalls
import DialtoneCluster
import DialtoneNet
import DialtoneProtocol
import DialtoneSFU
import DialtoneSessions
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
  /// Live calls this node took over (their node died or handed them over), from the journal;
  /// the devices of their users connected on any node; then the request that found them. The
  /// take-over of `attempted` is over, live calls or not: requests about them waiting go on.
  case adopt(
    [StoredLiveCall], ended: [RecentlyEndedCall] = [], connected: [Identity], then: ForwardedRequest?,
    attempted: Set<CallID>)
  /// Live calls another node runs now (this one lost their leases): they stop running here.
  case relinquish([CallID])
  /// A hello's session, opened or resumed in the cluster's store (`SharedSessions`).
  case sessionOpened(SessionOpening, SessionOpened)
  /// Messages the cluster's store numbered for sessions this node holds.
  case framesStored([StoredFrame])
  /// Sessions whose messages cannot all be written any more: their sockets close, their
  /// clients resume (or resync).
  case sessionsBroken([String])
  /// A message for the user's devices could not be stored: their sessions here close likewise.
  case deliveryFailed(userId: String)
  /// The cluster's Redis lost every session and presence: every socket here closes.
  case clusterStateLost
  /// A session waiting for a message before the ones it holds asks the store for it.
  case gapCheck(sessionID: String)
}

/// The cluster's events, as the hub's (in the order the cluster learned them).
extension SignalingHub: ClusterInbox {
  package nonisolated func receive(_ event: ClusterEvent) {
    switch event {
    case .letters(let letters): deliver(.cluster(letters))
    case .forwarded(let request): deliver(.forwarded(request))
    case .replyArrived(let sessionID, let requestID, let reply):
      deliver(.replyArrived(sessionID: sessionID, requestID: requestID, reply: reply))
    case .adopt(let stored, let ended, let connected, let request, let attempted):
      deliver(.adopt(stored, ended: ended, connected: connected, then: request, attempted: attempted))
    case .relinquish(let callIds): deliver(.relinquish(callIds))
    case .sessionOpened(let opening, let outcome): deliver(.sessionOpened(opening, outcome))
    case .framesStored(let frames): deliver(.framesStored(frames))
    case .sessionsBroken(let ids): deliver(.sessionsBroken(ids))
    case .deliveryFailed(let userId): deliver(.deliveryFailed(userId: userId))
    case .stateLost: deliver(.clusterStateLost)
    }
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
