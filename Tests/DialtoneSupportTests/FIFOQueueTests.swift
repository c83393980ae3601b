import DialtoneSupport
import Testing

struct FIFOQueueTests {
  @Test func itemsLeaveInOrderAcrossCompactions() {
    var queue = FIFOQueue<Int>()
    var model: [Int] = []
    // Interleaved appends and pops push the head past every compaction threshold.
    for round in 0..<50 {
      for n in 0..<(round * 7 % 90 + 1) {
        queue.append(round * 1000 + n)
        model.append(round * 1000 + n)
      }
      for _ in 0..<(model.count / 2 + 1) { #expect(queue.popFirst() == model.removeFirst()) }
      #expect(queue.count == model.count && queue.first == model.first)
    }
    #expect(Array(queue) == model)
    while !model.isEmpty { #expect(queue.popFirst() == model.removeFirst()) }
    #expect(queue.isEmpty && queue.first == nil && queue.popFirst() == nil)
  }

  @Test func orderIsFirstInFirstOut() {
    var queue = FIFOQueue<String>()
    for n in 0..<200 { queue.append("m\(n)") }
    for n in 0..<150 { #expect(queue.popFirst() == "m\(n)") }
    queue.append("late")
    #expect(Array(queue) == (150..<200).map { "m\($0)" } + ["late"])
    #expect(queue.count == 51)
  }
}
