import DialtoneTestSupport
import Testing

@testable import DialtoneNet

struct TimerHeapTests {
  private func timer(_ deadline: UInt64, _ sequence: UInt64) -> LoopTimer {
    LoopTimer(deadline: deadline, sequence: sequence, owner: nil) {}
  }

  /// Random inserts, removals of arbitrary members and pops against a sorted list: the heap
  /// always yields the earliest deadline, equal deadlines in the order they were scheduled, and
  /// every member knows its place (a removal finds it).
  @Test func behavesAsASortedList() {
    var generator = SeededGenerator(seed: 40)
    var heap = TimerHeap()
    var model: [LoopTimer] = []
    var sequence: UInt64 = 0
    for _ in 0..<5_000 {
      switch generator.next() % 10 {
      case 0...4:
        sequence += 1
        // Few distinct deadlines, so that ties are common.
        let entry = timer(generator.next() % 16, sequence)
        heap.insert(entry)
        model.append(entry)
      case 5...7 where !model.isEmpty:
        let victim = model[Int(generator.next() % UInt64(model.count))]
        let removed = heap.remove(victim)
        let removedAgain = heap.remove(victim)
        #expect(removed && !removedAgain)
        #expect(victim.heapIndex == -1)
        model.removeAll { $0 === victim }
      default:
        model.sort(by: TimerHeap.precedes)
        let popped = heap.popFirst()
        #expect(popped === model.first)
        if !model.isEmpty { model.removeFirst() }
      }
      #expect(heap.count == model.count)
      for (index, entry) in heap.entries.enumerated() { #expect(entry.heapIndex == index) }
    }
    model.sort(by: TimerHeap.precedes)
    for expected in model { #expect(heap.popFirst() === expected) }
    #expect(heap.isEmpty)
  }

  @Test func equalDeadlinesComeOutInScheduleOrder() {
    var heap = TimerHeap()
    let entries = (1...20).map { timer(7, UInt64($0)) }
    for entry in entries.reversed() { heap.insert(entry) }
    var order: [UInt64] = []
    while let entry = heap.popFirst() { order.append(entry.sequence) }
    #expect(order == Array(1...20))
  }

  @Test func aTimerNotInTheHeapIsNotRemoved() {
    var heap = TimerHeap()
    let inside = timer(1, 1)
    let outside = timer(1, 2)
    heap.insert(inside)
    let removed = heap.remove(outside)
    #expect(!removed)
    #expect(heap.count == 1)
    let all = heap.removeAll()
    #expect(all.count == 1)
    #expect(inside.heapIndex == -1)
  }
}
