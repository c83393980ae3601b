/// Sessions whose stream has a hole: a message for them (or for some session of a user) could not
/// be stored because Redis failed. Once Redis answers again each is made unresumable
/// (`SessionLedger.poison`) and its socket closed, so that the client resyncs instead of
/// carrying on past a message it will never see. Bounded: past `capacity` entries the oldest
/// are forgotten (and said so), as a Redis that stays away that long has lost more than this.
package struct SessionPoison: Sendable {
  package private(set) var sessions: Set<String> = []
  package private(set) var users: Set<String> = []
  package let capacity: Int
  /// Entries forgotten since the last `take` for want of room.
  package private(set) var overflowed = 0

  package init(capacity: Int = 10_000) { self.capacity = max(1, capacity) }

  package var isEmpty: Bool { sessions.isEmpty && users.isEmpty }

  package mutating func add(session: String) {
    guard sessions.count < capacity else {
      overflowed += 1
      return
    }
    sessions.insert(session)
  }

  package mutating func add(user: String) {
    guard users.count < capacity else {
      overflowed += 1
      return
    }
    users.insert(user)
  }

  /// Everything noted so far, leaving the list empty.
  package mutating func take() -> SessionPoison {
    defer { self = SessionPoison(capacity: capacity) }
    return self
  }

  /// Puts back what could not be handled yet.
  package mutating func merge(_ other: SessionPoison) {
    for session in other.sessions { add(session: session) }
    for user in other.users { add(user: user) }
  }
}
