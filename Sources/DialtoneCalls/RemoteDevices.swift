import DialtoneProtocol

/// The devices the hub cannot see itself: those with a session on another node of a cluster
/// (issue 19's first seam). A single server has none (`NoRemoteDevices`), so it behaves exactly as
/// before. Messages reach them through `SharedSessions`; this seam answers who needs a push and
/// tells the other nodes when a socket here closes. Called on the hub's own thread, never
/// blocking: the work runs on a thread of the implementation's own.
package protocol RemoteDevices: Sendable {
  /// Hands a call event (a ring, a missed call, an end) to the sink that pushes and counts it,
  /// with every device of its user whose socket is open, here (`connectedHere`) or on another
  /// node: those need no push. In the hub's order, possibly later and on another thread.
  func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink)
  /// The device's socket closed (`ended` false: the session may still resume) or its session
  /// ended here. (A session opening here is announced by `SharedSessions.open`.)
  func detached(_ identity: Identity, session: String, ended: Bool)
}

/// One server: every device is local.
package struct NoRemoteDevices: RemoteDevices {
  package func dispatch(_ event: CallEvent, connectedHere: Set<String>, to sink: any CallEffectSink) {
    sink.handle(event, connectedDevices: connectedHere)
  }
  package func detached(_ identity: Identity, session: String, ended: Bool) {}

  package init() {
  }
}
