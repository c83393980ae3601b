import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The sessions of this node, by id and by device: who can be reached here. A session whose
/// socket dropped stays until its resume window passes (`expire`).
package final class SessionRegistry {
  package private(set) var byID: [String: any DeliverySession] = [:]
  /// user → the user's sessions by device.
  private var byDevice: [String: DeviceSessions] = [:]
  private var expiries: [String: any ScheduledAction] = [:]

  package init() {}

  package var count: Int { byID.count }
  package var connectedCount: Int { byID.values.reduce(0) { $0 + ($1.isConnected ? 1 : 0) } }

  package func session(_ id: String) -> (any DeliverySession)? { byID[id] }

  package func session(of who: Identity) -> (any DeliverySession)? { byDevice[who.userId]?[who.deviceId] }

  /// A device's session (every relayed message's target is found here): the user's id hashed
  /// once, a one-device user's device compared, not hashed.
  package func session(of userId: String, device deviceId: String) -> (any DeliverySession)? {
    byDevice[userId]?[deviceId]
  }

  /// A user's sessions here, by device.
  package func sessions(of userId: String) -> DeviceSessions { byDevice[userId] ?? DeviceSessions() }

  package func deviceCount(of userId: String) -> Int { byDevice[userId]?.count ?? 0 }

  /// The session is the device's from now on; a resume window running for it stops.
  package func add(_ session: any DeliverySession) {
    byID[session.id] = session
    byDevice[session.identity.userId, default: DeviceSessions()].set(session, for: session.identity.deviceId)
    expiries.removeValue(forKey: session.id)?.cancel()
  }

  /// The session leaves this node (ended, or resumed elsewhere through a store).
  package func remove(_ session: any DeliverySession) {
    byID.removeValue(forKey: session.id)
    expiries.removeValue(forKey: session.id)?.cancel()
    let who = session.identity
    if byDevice[who.userId]?[who.deviceId] === session {
      byDevice[who.userId]?.remove(who.deviceId)
      if byDevice[who.userId]?.isEmpty == true { byDevice[who.userId] = nil }
    }
  }

  /// Starts the session's resume window: `expired` runs when it passes (unless a socket came back).
  package func expire(
    _ session: any DeliverySession, after window: Duration, on clock: any DialtoneClock,
    _ expired: @escaping @Sendable () -> Void
  ) {
    expiries[session.id]?.cancel()
    expiries[session.id] = clock.schedule(after: window, expired)
  }

  /// The window of a session that expired is over (the timer fired).
  package func expired(_ id: String) { expiries.removeValue(forKey: id) }

  /// The devices of the user with a live socket here (those a push would wake for nothing).
  package func connectedDeviceIDs(of userId: String) -> Set<String> {
    Set(sessions(of: userId).lazy.map(\.session).filter(\.isConnected).map(\.identity.deviceId))
  }

  package func liveDevices(of userId: String) -> [(deviceId: String, connectedAt: Date)] {
    sessions(of: userId).lazy.map(\.session).filter(\.isConnected).map { ($0.identity.deviceId, $0.connectedAt) }
      .sorted { $0.deviceId < $1.deviceId }
  }
}
