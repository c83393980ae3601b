/// The network loop's pending timers, earliest first: a binary min-heap ordered by deadline, and
/// among equal deadlines by the order they were scheduled in. Each entry knows its place in the
/// heap (`heapIndex`), so that cancelling one removes it at once (O(log n)) instead of leaving it
/// to wake the loop at its deadline. A plain value, touched only on the loop's thread.
struct TimerHeap {
  private(set) var entries: [LoopTimer] = []

  var isEmpty: Bool { entries.isEmpty }
  var count: Int { entries.count }
  /// The timer due first, if any.
  var first: LoopTimer? { entries.first }

  mutating func insert(_ timer: LoopTimer) {
    timer.heapIndex = entries.count
    entries.append(timer)
    siftUp(entries.count - 1)
  }

  /// Takes out the timer due first.
  @discardableResult
  mutating func popFirst() -> LoopTimer? {
    guard !entries.isEmpty else { return nil }
    return remove(at: 0)
  }

  /// Takes `timer` out if it is in this heap; false when it is not (fired, cancelled, never in).
  @discardableResult
  mutating func remove(_ timer: LoopTimer) -> Bool {
    let index = timer.heapIndex
    guard index >= 0, index < entries.count, entries[index] === timer else { return false }
    remove(at: index)
    return true
  }

  /// Empties the heap, returning its timers (in no particular order).
  mutating func removeAll() -> [LoopTimer] {
    let all = entries
    entries = []
    for timer in all { timer.heapIndex = -1 }
    return all
  }

  @discardableResult
  private mutating func remove(at index: Int) -> LoopTimer {
    let removed = entries[index]
    let last = entries.count - 1
    if index != last {
      entries.swapAt(index, last)
      entries[index].heapIndex = index
    }
    entries.removeLast()
    removed.heapIndex = -1
    if index < entries.count {
      // The element moved into the hole may belong above it or below it.
      if index > 0 && Self.precedes(entries[index], entries[(index - 1) / 2]) {
        siftUp(index)
      } else {
        siftDown(index)
      }
    }
    return removed
  }

  static func precedes(_ a: LoopTimer, _ b: LoopTimer) -> Bool {
    a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
  }

  private mutating func siftUp(_ start: Int) {
    var child = start
    while child > 0 {
      let parent = (child - 1) / 2
      guard Self.precedes(entries[child], entries[parent]) else { break }
      swapEntries(child, parent)
      child = parent
    }
  }

  private mutating func siftDown(_ start: Int) {
    var parent = start
    let count = entries.count
    while true {
      let left = 2 * parent + 1
      guard left < count else { return }
      let right = left + 1
      var smallest = left
      if right < count && Self.precedes(entries[right], entries[left]) { smallest = right }
      guard Self.precedes(entries[smallest], entries[parent]) else { return }
      swapEntries(parent, smallest)
      parent = smallest
    }
  }

  private mutating func swapEntries(_ i: Int, _ j: Int) {
    entries.swapAt(i, j)
    entries[i].heapIndex = i
    entries[j].heapIndex = j
  }
}
