import DialtoneProtocol

/// Where a call's state machine runs: on this node, on the node of a cluster that owns it, or
/// wherever the placement finds out when the request is forwarded (it may be here after all).
package enum CallLocation: Sendable, Equatable {
  case here
  case node(String)
  case unknown

  /// The owner's name when it is known.
  package var node: String? {
    if case .node(let name) = self { return name }
    return nil
  }
}

/// A device's request about a call another node runs, as that node receives it (the cluster's
/// transport builds it, naming the node it came from).
package struct ForwardedRequest: Sendable, Equatable {
  /// Where the answer goes back to: the requesting device's session on its node.
  package struct Origin: Sendable, Equatable {
    package let node: String
    package let sessionID: String

    package init(node: String, sessionID: String) {
      self.node = node
      self.sessionID = sessionID
    }
  }

  package let message: ClientMessage
  package let id: String
  package let from: Identity
  package let origin: Origin

  package init(message: ClientMessage, id: String, from: Identity, origin: Origin) {
    self.message = message
    self.id = id
    self.from = from
    self.origin = origin
  }
}

/// Which node runs each call (issue 19's second seam). A single server runs every call
/// (`LocalCalls`). In a cluster a request about a call owned elsewhere is forwarded there; the
/// owner handles it as its own device's and sends the answer back, which the requesting node
/// remembers and delivers as if it had answered itself. Called on the hub's thread: answers come
/// from what the implementation knows, and sending is handed to a thread of its own.
package protocol CallPlacement: Sendable {
  /// This node's name in `ForwardedRequest.Origin`.
  var thisNode: String { get }
  /// Where requests about a call this hub does not run are handled; a call nobody runs yet is
  /// placed here.
  func location(of callId: CallID) -> CallLocation
  /// Passes the request of a session here on to the node that runs its call (`node`), or to
  /// wherever the placement finds it runs (nil: `.unknown`). A request that turns out to be this
  /// node's comes back as a `.forwarded` event from `thisNode`.
  func forward(_ message: ClientMessage, id: String, from: Identity, session: String, to node: String?)
  /// Sends the answer to a forwarded request back to its origin (another node).
  func reply(_ reply: ServerMessage, to request: ForwardedRequest)
  /// Whether the ack to a relayed candidate forwarded here goes back without a seq and unstored
  /// (`replyUnstored`), and is not remembered: a cluster's write-behind mode.
  var repliesUnstored: Bool { get }
  /// Sends the ack to a forwarded relayed candidate back to its origin without a seq, neither
  /// stored nor remembered, once the copies the candidate caused here are stored.
  func replyUnstored(_ reply: ServerMessage, to request: ForwardedRequest)
  /// A new call runs here: one another node sent here because its users are in a call that
  /// runs here (busy and glare are decided by one router), or one placed here already.
  func running(_ callId: CallID, users: [String])
  /// A call that runs here was accepted: its users are busy for calls placed on other nodes.
  func answered(_ callId: CallID)
  /// A call this hub ran ended (its end is in the journal): nobody runs it any more.
  func finished(_ callId: CallID)
  /// Whether this node is taking the call over right now: a request about it waits for the
  /// call to run here (`takenOver`).
  func isBeingTakenOver(_ callId: CallID) -> Bool
  /// The hub runs these calls now (or found them ended).
  func takenOver(_ callIds: Set<CallID>)
  /// True when every call is placed here (one server): a request then needs no look-up of
  /// where its call runs.
  var placesEveryCallHere: Bool { get }
}

extension CallPlacement {
  package var placesEveryCallHere: Bool { false }
  package var repliesUnstored: Bool { false }
  package func replyUnstored(_ reply: ServerMessage, to request: ForwardedRequest) { self.reply(reply, to: request) }
}

/// One server: every call runs here.
package struct LocalCalls: CallPlacement {
  package var thisNode: String { "local" }
  package func location(of callId: CallID) -> CallLocation { .here }
  package func forward(_ message: ClientMessage, id: String, from: Identity, session: String, to node: String?) {}
  package func reply(_ reply: ServerMessage, to request: ForwardedRequest) {}
  package func running(_ callId: CallID, users: [String]) {}
  package func answered(_ callId: CallID) {}
  package func finished(_ callId: CallID) {}
  package func isBeingTakenOver(_ callId: CallID) -> Bool { false }
  package func takenOver(_ callIds: Set<CallID>) {}
  package var placesEveryCallHere: Bool { true }

  package init() {
  }
}

/// Taking a call over from another node (a cluster's): requests about a call whose lease was won
/// here wait for its journal to be read, at most this long; should the take-over never report
/// back, they go on with whatever answer this node has.
package enum TakeOver {
  package static let wait = Duration.seconds(10)
}
