import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The sessions of this node, by id and by device: who can be reached here. A session whose
/// socket dropped stays until its resume window passes (`expire`).
package final class SessionRegistry {
  package private(set) var byID: [String: any DeliverySession] = [:]
  /// user → the user's sessions by device.
  private var byDevice: [String: DeviceSessions] = [:]
  /// `byDevice` for a look-up: the map is read out of the property (one access, no call inside
  /// it) and searched after, so that no access to the property spans hashing and comparing
  /// ids, which made each one a runtime exclusivity check.
  private var devices: [String: DeviceSessions] { byDevice }
  private var expiries: [String: any ScheduledAction] = [:]

  package init() {}

  package var count: Int { byID.count }
  package var connectedCount: Int { byID.values.reduce(0) { $0 + ($1.isConnected ? 1 : 0) } }

  package func session(_ id: String) -> (any DeliverySession)? { byID[id] }

  package func session(of who: Identity) -> (any DeliverySession)? { devices[who.userId]?[who.deviceId] }

  /// A device's session (every relayed message's target is found here): the user's id hashed
  /// once, a one-device user's device compared, not hashed.
  package func session(of userId: String, device deviceId: String) -> (any DeliverySession)? {
    devices[userId]?[deviceId]
  }

  /// A user's sessions here, by device.
  package func sessions(of userId: String) -> DeviceSessions { devices[userId] ?? DeviceSessions() }

  package func deviceCount(of userId: String) -> Int { devices[userId]?.count ?? 0 }

  /// The session is the device's from now on; a resume window running for it stops.
  package func add(_ session: any DeliverySession) {
    byID[session.id] = session
    let who = session.identity
    changeByDevice { $0[who.userId, default: DeviceSessions()].set(session, for: who.deviceId) }
    expiries.removeValue(forKey: session.id)?.cancel()
  }

  /// The session leaves this node (ended, or resumed elsewhere through a store).
  package func remove(_ session: any DeliverySession) {
    byID.removeValue(forKey: session.id)
    expiries.removeValue(forKey: session.id)?.cancel()
    let who = session.identity
    guard devices[who.userId]?[who.deviceId] === session else { return }
    changeByDevice { byDevice in
      byDevice[who.userId]?.remove(who.deviceId)
      if byDevice[who.userId]?.isEmpty == true { byDevice[who.userId] = nil }
    }
  }

  /// Changes `byDevice` on the map moved out of the property and back. An access to the
  /// property spanning the dictionary's own calls (which may free what they drop: code the
  /// optimiser cannot see through) made every access to it a runtime exclusivity check, the
  /// look-up each relayed message makes included. `change` only changes the map.
  private func changeByDevice(_ change: (inout [String: DeviceSessions]) -> Void) {
    var map: [String: DeviceSessions] = [:]
    swap(&map, &byDevice)
    defer { swap(&map, &byDevice) }
    change(&map)
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
