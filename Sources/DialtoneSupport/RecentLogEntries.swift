/// A sink that keeps the latest entries in memory, the oldest overwritten first: what an app
/// attaches to a bug report or shows on a diagnostics screen, and what tests read back.
public final class RecentLogEntries: LogSink {
  private struct Ring {
    var slots: [LogEntry] = []
    /// Where the next entry goes once `slots` is full (the oldest kept entry).
    var next = 0
    var dropped = 0
  }

  public let capacity: Int
  private let ring = Locked(Ring())

  public init(capacity: Int = 500) {
    self.capacity = max(1, capacity)
  }

  public func write(_ entry: LogEntry) {
    ring.withLock { ring in
      if ring.slots.count < capacity {
        ring.slots.append(entry)
      } else {
        ring.slots[ring.next] = entry
        ring.next = (ring.next + 1) % capacity
        ring.dropped += 1
      }
    }
  }

  /// The kept entries, oldest first.
  public var entries: [LogEntry] {
    ring.withLock { Array($0.slots[$0.next...] + $0.slots[..<$0.next]) }
  }

  /// How many entries were overwritten to stay within `capacity`.
  public var droppedCount: Int { ring.withLock { $0.dropped } }
}
