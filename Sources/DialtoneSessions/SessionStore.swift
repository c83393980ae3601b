import DialtoneProtocol

/// Where device sessions live when they must outlive the node holding their socket: a cluster
/// stores every sequenced message where any node can resume the session, and gives it its seq
/// there (`SharedSession`). A single server has no store: its `LocalSession`s number and keep
/// their messages themselves, and `LocalSessions` decides their opening at once.
///
/// The hub calls these on its own thread and never waits: the implementation works in the hub's
/// order on a thread of its own, and what comes back arrives as hub events (`sessionOpened`,
/// `framesStored`, `sessionsBroken`, `deliveryFailed`).
package protocol SessionStore: Sendable {
  /// Resumes the session the client names, or opens a new one (`opening.freshID`), held by this
  /// node, and registers the device here for the other nodes; answers with `.sessionOpened`.
  func open(_ opening: SessionOpening)
  /// Whether a request of this node's own client (`bytes` long) may be handled now: false when
  /// the store cannot take what it may cause (too much waits for it), and then the hub answers
  /// `rate-limited` and handles nothing, so no call's state moves for a request whose messages
  /// could not be kept. Asked before the request is handled (not for a relayed candidate, which
  /// moves no state and may be refused after); true keeps room for its messages.
  func admit(_ requestID: String, of sessionID: String, bytes: Int) -> Bool
  /// Stores a message for a session (remembered as the answer to `requestID` when given); it
  /// comes back in `.framesStored` with its seq when this node holds the session.
  func append(_ message: ServerMessage, to sessionID: String, answering requestID: String?, coalesced: Bool)
  /// The answer to a relayed candidate (`DeliverySession.answerRelayed`): true when the store
  /// writes it itself, without a seq, once the copies the request caused are stored, and
  /// neither stores nor remembers it (a cluster's write-behind holder); false when it is to be
  /// stored as any answer (`append`).
  func answerUnstored(_ reply: ServerMessage, to sessionID: String, answering requestID: String) -> Bool
  /// Stores a message for the user's sessions wherever they are: one device's, or every device's
  /// but `skipping`.
  func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>)
  /// The client processed everything through `seq`.
  func acknowledge(_ sessionID: String, through seq: UInt64)
  /// Reads the messages after `seq` again, for a session that missed one (`.framesStored`, or
  /// `.sessionsBroken` when they are gone).
  func fetch(_ sessionID: String, after seq: UInt64)
  /// The session ended here (replaced, or its resume window passed): it is removed unless
  /// another node resumed it meanwhile.
  func end(_ sessionID: String)
  /// Stores what `append`, `deliver` and `acknowledge` asked for since the last flush, all or
  /// nothing (the hub flushes once per event, so that an answer never lands without what its
  /// request caused).
  func flush()
  /// Sets the store's gauges (before a scrape of `/metrics`).
  func refreshGauges()
}

extension SessionStore {
  package func answerUnstored(_ reply: ServerMessage, to sessionID: String, answering requestID: String) -> Bool {
    false
  }
}

/// A hello waiting for its session.
package struct SessionOpening: Sendable {
  package let socketID: UInt64
  package let identity: Identity
  /// The hello's request id and what the welcome needs from it.
  package let helloID: String
  package let features: [String]
  /// The id a new session gets.
  package let freshID: String
  /// The session the client asks to resume, and the last seq it processed.
  package let resume: ClientMessage.Resume?

  package init(
    socketID: UInt64, identity: Identity, helloID: String, features: [String], freshID: String,
    resume: ClientMessage.Resume?
  ) {
    self.socketID = socketID
    self.identity = identity
    self.helloID = helloID
    self.features = features
    self.freshID = freshID
    self.resume = resume
  }
}

/// What `SessionStore.open` found.
package enum SessionOpened: Sendable {
  /// A new session (`resync`: the one asked for could not be resumed).
  case fresh(sessionID: String, resync: Bool)
  /// The session asked for, held here now: `pending` are its messages after the client's last
  /// seq, `replies` the answers it remembers by request id.
  case resumed(sessionID: String, pending: [StoredFrame], replies: [String: ServerMessage])
  /// No session could be opened (the shared store cannot be reached): the client tries later.
  case failed(String)
}

/// A message stored for a session this node holds, with its seq.
package struct StoredFrame: Sendable, Equatable {
  package let sessionID: String
  package let seq: UInt64
  package let bytes: [UInt8]
  /// Whether writing it may wait to share a write with the next one (`--ack-delay-ms`).
  package var coalesced = false

  package init(sessionID: String, seq: UInt64, bytes: [UInt8], coalesced: Bool = false) {
    self.sessionID = sessionID
    self.seq = seq
    self.bytes = bytes
    self.coalesced = coalesced
  }
}
