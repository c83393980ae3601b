import DialtoneSupport
import Foundation
import Testing

struct BlockingQueueTests {
  @Test func itemsLeaveInOrderAndABatchTakesEverythingWaiting() {
    let queue = BlockingQueue<Int>(capacity: 10)
    for n in 1...3 { #expect(queue.put(n) == nil) }
    #expect(queue.take() == 1)
    #expect(queue.takeAll() == [2, 3])
    #expect(queue.count == 0)
  }

  @Test func aFullQueueRefusesAndAClosedOneTakesNothingMore() {
    let queue = BlockingQueue<Int>(capacity: 2)
    #expect(queue.put(1) == nil && queue.put(2) == nil)
    #expect(queue.put(3) == .full)
    queue.close()
    #expect(queue.put(4) == .closed)
    // What was queued before the close is still drained, then the workers are told to stop.
    #expect(queue.take() == 1 && queue.take() == 2)
    #expect(queue.take() == nil && queue.takeAll().isEmpty)
  }

  @Test func closingNowHandsBackWhatWasWaiting() {
    let queue = BlockingQueue<String>()
    queue.put("a")
    queue.put("b")
    #expect(queue.closeNow() == ["a", "b"])
    #expect(queue.take() == nil)
  }

  /// A worker sleeping on an empty queue wakes for the first item, and for the close.
  @Test func aWorkerSleepsUntilThereIsWorkAndEndsWithTheClose() {
    let queue = BlockingQueue<Int>()
    let seen = Locked<[Int]>([])
    let worker = WorkerThread(name: "test-worker") {
      while let item = queue.take() { seen.withLock { $0.append(item) } }
    }
    queue.put(7)
    queue.put(8)
    #expect(!worker.wait(upTo: .milliseconds(50)))  // still waiting for work
    queue.close()
    #expect(worker.wait(upTo: .seconds(10)))
    #expect(seen.current == [7, 8])
    #expect(worker.wait(upTo: .zero))  // a second waiter gets through too
  }
}
