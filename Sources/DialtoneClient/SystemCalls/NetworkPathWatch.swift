/// Tells a network switch from the path monitor's updates (`NWPathMonitor` on iOS): the first
/// update is the path the app started on, not a change, and an unsatisfied path is no
/// network to reconnect to.
public struct NetworkPathWatch: Sendable, Equatable {
  private var last: [String]?

  public init() {}

  /// `interfaces`: the satisfied path's interface names, empty when it is unsatisfied.
  /// Returns true when signaling should reconnect now.
  public mutating func update(interfaces: [String]) -> Bool {
    defer { last = interfaces }
    guard let last else { return false }
    return last != interfaces && !interfaces.isEmpty
  }
}
