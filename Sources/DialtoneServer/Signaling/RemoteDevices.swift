import DialtoneProtocol

/// The devices the hub cannot reach itself: those with a session on another node of a cluster
/// (issue 19's first seam). A single server has none (`NoRemoteDevices`), so it behaves exactly as
/// before. The hub calls these on its own thread for every effect it applies: an implementation
/// answers from what it already knows (presence it keeps current) and hands deliveries to a
/// thread of its own, never blocking.
protocol RemoteDevices: Sendable {
  /// False for a single server: the hub then skips what only other nodes need (the set of
  /// devices it delivered to, built on every delivery to a user).
  var reachesOtherNodes: Bool { get }
  /// Hands a call event (a ring, a missed call, an end) to the sink that pushes and counts it,
  /// with every device of its user whose socket is open, here (`connectedHere`) or on another
  /// node: those need no push. In the hub's order, possibly later and on another thread.
  func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink)
  /// Delivers to the user's devices on other nodes: `device` alone, or every device of the user
  /// but those in `skipping` (the ones this node delivered to, and the recipient's exception).
  func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>)
  /// The device's socket is on this node now, in a new or a resumed session: other nodes send
  /// its messages here, close a session of the same device they still hold (replaced), and the
  /// nodes running its calls learn it is back (a new session is rung again).
  func attached(_ identity: Identity, session: String, newSession: Bool)
  /// The device's socket closed (`ended` false: the session may still resume on this node) or
  /// its session ended here.
  func detached(_ identity: Identity, session: String, ended: Bool)
}

/// One server: every device is local.
struct NoRemoteDevices: RemoteDevices {
  var reachesOtherNodes: Bool { false }
  func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink) {
    sink.handle(event, connectedDevices: connectedHere)
  }
  func deliver(_ message: ServerMessage, to userId: String, device: String?, skipping: Set<String>) {}
  func attached(_ identity: Identity, session: String, newSession: Bool) {}
  func detached(_ identity: Identity, session: String, ended: Bool) {}
}
