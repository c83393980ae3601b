import DialtoneSupport

/// Records every event of a stream as it arrives, for tests to query while the stream runs.
public final class EventLog<Event: Sendable>: Sendable {
  private let items = Locked<[Event]>([])

  public init(_ events: AsyncStream<Event>) {
    Task { [weak self] in
      for await event in events { self?.items.withLock { $0.append(event) } }
    }
  }

  /// The events recorded so far, in arrival order.
  public var all: [Event] { items.current }

  /// The payloads of the events that have one, in arrival order.
  public func compactMap<T>(_ payload: (Event) -> T?) -> [T] {
    items.withLock { $0.compactMap(payload) }
  }

  public func count(where matches: (Event) -> Bool) -> Int {
    items.withLock { $0.count(where: matches) }
  }

  public func contains(where matches: (Event) -> Bool) -> Bool {
    items.withLock { $0.contains(where: matches) }
  }
}
