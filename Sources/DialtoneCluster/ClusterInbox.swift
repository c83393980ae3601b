import DialtoneCalls
import DialtoneProtocol
import DialtoneSessions
import DialtoneStorage

/// What a node's part of the cluster learns that its hub must act on, in the order it learned it.
package enum ClusterEvent: Sendable {
  /// Letters from other nodes, in the order they were sent.
  case letters([ClusterLetter])
  /// A device's request about a call that runs here (from another node, or sent back here).
  case forwarded(ForwardedRequest)
  /// The answer to a request of a session here that another node handled (or could not reach).
  case replyArrived(sessionID: String, requestID: String, reply: ServerMessage)
  /// Live calls taken over (their node died or handed them over), as the journal has them (1:1
  /// and group calls); the devices of their users connected on any node; then the request that
  /// found them. The take-over of `attempted` is over, live calls or not: requests about them
  /// waiting go on.
  case adopt(
    [StoredLiveCall], groups: [StoredGroupCall], ended: [RecentlyEndedCall], connected: [Identity],
    then: ForwardedRequest?, attempted: Set<CallID>)
  /// Live calls another node runs now (this one lost their leases): they stop running here.
  case relinquish([CallID])
  /// A hello's session, opened or resumed in the cluster's store.
  case sessionOpened(SessionOpening, SessionOpened)
  /// Messages the store numbered for sessions this node holds.
  case framesStored([StoredFrame])
  /// Sessions whose messages cannot all be written any more: their sockets close.
  case sessionsBroken([String])
  /// Requests whose event this node's write-behind holder refused whole (too much waits for
  /// Redis): nothing they caused was numbered, so each is answered `rate-limited`, its
  /// remembered answer forgotten, and handled afresh when sent again (protocol.md §15).
  case requestsRefused([RefusedRequest])
  /// Answers to requests other nodes forwarded (session: the requester's) that this node's
  /// write-behind holder dropped, what they caused here never stored (its lease lapsed, or too
  /// much waited for Redis): their remembered answers are forgotten, so that each request
  /// forwarded again is handled afresh.
  case forwardedDropped([RefusedRequest])
  /// Answers to relayed candidates of sessions held here, without a seq, whose copies are stored
  /// (`WriteBehindHolder.UnstoredAnswer`): written to their sockets, not remembered.
  case answersUnstored([WriteBehindHolder.UnstoredAnswer])
  /// A message for the user's devices could not be stored: their sessions here close likewise.
  case deliveryFailed(userId: String)
  /// Redis lost every session and presence: every socket here closes.
  case stateLost
}

/// Where the cluster delivers what it learns: the node's hub (or a test's recorder). Called from
/// the cluster's threads; the receiver takes the event over to its own.
package protocol ClusterInbox: AnyObject, Sendable {
  func receive(_ event: ClusterEvent)
}
