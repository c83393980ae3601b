/// A first-in first-out queue over an array with a moving head: taking from the front costs no
/// shifting, and the array is compacted only once the consumed prefix is at least half of it.
/// Taken slots are cleared at once, so a queue of byte buffers frees each buffer when it leaves.
/// Used for a socket's outgoing queue, the loop's coalescing deadlines and a delivery session's
/// unacknowledged messages.
public struct FIFOQueue<Element>: Sequence {
  private var storage: [Element?] = []
  private var head = 0

  public init() {}

  public var isEmpty: Bool { head == storage.count }
  public var count: Int { storage.count - head }
  public var first: Element? { isEmpty ? nil : storage[head] }

  public mutating func append(_ element: Element) {
    storage.append(element)
  }

  @discardableResult
  public mutating func popFirst() -> Element? {
    guard !isEmpty else { return nil }
    // Moved out (swapped with nil), not copied then cleared: no retain and release of it.
    var element: Element? = nil
    swap(&element, &storage[head])
    head += 1
    if head == storage.count {
      // Idle queues (most sockets) keep only a small buffer.
      storage.removeAll(keepingCapacity: storage.count <= 64)
      head = 0
    } else if head >= 64, head * 2 >= storage.count {
      storage.removeFirst(head)
      head = 0
    }
    return element
  }

  public func makeIterator() -> some IteratorProtocol<Element> {
    storage[head...].lazy.compactMap { $0 }.makeIterator()
  }
}
