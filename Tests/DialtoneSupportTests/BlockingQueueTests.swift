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

  /// A deadline that passed is handed out before the items waiting (a busy queue does not starve
  /// it), once; then the items come in order.
  @Test func aPassedDeadlineComesBeforeTheItemsAndOnlyOnce() {
    let queue = BlockingQueue<Int>()
    queue.put(1)
    queue.wake(at: .now - .milliseconds(1))
    queue.wake(at: .now + .seconds(3600))  // a later one does not replace it
    let taken = (0..<3).map { n -> String in
      if n == 2 { queue.close() }
      switch queue.takeOrDeadline() {
      case .deadline: return "deadline"
      case .item(let item): return "item \(item)"
      case .closed: return "closed"
      }
    }
    #expect(taken == ["deadline", "item 1", "closed"])
  }

  /// `take` and `takeAll` share `takeOrDeadline`'s wait but never hand out the deadline: it
  /// stays asked for the next `takeOrDeadline`.
  @Test func onlyTakeOrDeadlineHandsOutTheDeadline() {
    let queue = BlockingQueue<Int>()
    queue.put(1)
    queue.put(2)
    queue.put(3)
    queue.wake(at: .now - .milliseconds(1))
    #expect(queue.take() == 1)
    #expect(queue.takeAll() == [2, 3])
    queue.put(4)
    queue.close()
    var taken: [String] = []
    for _ in 0..<3 {
      switch queue.takeOrDeadline() {
      case .deadline: taken.append("deadline")
      case .item(let item): taken.append("item \(item)")
      case .closed: taken.append("closed")
      }
    }
    #expect(taken == ["deadline", "item 4", "closed"])
    #expect(queue.take() == nil && queue.takeAll().isEmpty)
  }

  /// A worker asleep on an empty queue with no deadline wakes for one asked meanwhile.
  @Test func aSleepingWorkerWakesAtADeadlineAskedWhileItSlept() {
    let queue = BlockingQueue<Int>()
    let woken = DispatchSemaphore(value: 0)
    let worker = WorkerThread(name: "test-worker") {
      while true {
        switch queue.takeOrDeadline() {
        case .deadline: woken.signal()
        case .item: continue
        case .closed: return
        }
      }
    }
    #expect(woken.wait(timeout: .now() + .milliseconds(50)) == .timedOut)  // asleep, nothing asked
    queue.wake(at: .now + .milliseconds(5))
    #expect(woken.wait(timeout: .now() + 10) == .success)
    queue.close()
    #expect(worker.wait(upTo: .seconds(10)))
  }
}
