import DialtoneTestSupport
import Testing

@testable import DialtoneSessions

struct HeldOutcomesTests {
  @Test func outcomesLeaveInOrderOnceTheirTicketIsWritten() {
    var held = HeldOutcomes<String>()
    held.hold("accept", for: "c1", until: 1)
    // Writes nothing, but must not overtake the accept of its call.
    held.hold("candidate", for: "c1", until: held.pendingTicket(of: "c1") ?? 0)
    held.hold("invite c2", for: "c2", until: 2)
    #expect(held.release(upTo: 0).isEmpty)
    #expect(held.release(upTo: 1) == ["accept", "candidate"])
    #expect(held.pendingTicket(of: "c1") == nil)
    #expect(held.release(upTo: 5) == ["invite c2"])
    #expect(held.isEmpty)
  }

  @Test func aLaterOutcomeOfACallNeverLeavesBeforeAnEarlierOne() {
    var held = HeldOutcomes<String>()
    held.hold("first", for: "c1", until: 3)
    held.hold("second", for: "c1", until: 2)  // an older ticket, queued behind a newer one
    #expect(held.release(upTo: 2).isEmpty)
    #expect(held.release(upTo: 3) == ["first", "second"])
  }
}

/// The held outcomes against a plain model of their rule (per call, in order, each behind the
/// newest ticket of its call so far), over a long seeded run of calls that write and calls that
/// only wait, with commits at every point.
struct HeldOutcomesModelTests {
  private struct Model {
    var queues: [String: [(ticket: UInt64, order: Int, item: Int)]] = [:]
    var order = 0

    func pending(_ callId: String) -> UInt64? { queues[callId]?.last?.ticket }

    mutating func hold(_ item: Int, _ callId: String, _ ticket: UInt64) {
      order += 1
      queues[callId, default: []].append((max(ticket, pending(callId) ?? 0), order, item))
    }

    mutating func release(upTo committed: UInt64) -> [Int] {
      var out: [(Int, Int)] = []
      for (callId, queue) in queues {
        let ready = queue.prefix { $0.ticket <= committed }
        out += ready.map { ($0.order, $0.item) }
        queues[callId] = ready.count == queue.count ? nil : Array(queue.dropFirst(ready.count))
      }
      return out.sorted { $0.0 < $1.0 }.map(\.1)
    }
  }

  @Test func aLongRunMatchesTheModel() {
    var random = SeededGenerator(seed: 0x5eed)
    var held = HeldOutcomes<Int>()
    var model = Model()
    var nextTicket: UInt64 = 0
    var committed: UInt64 = 0
    for item in 0..<20_000 {
      let callId = "c\(Int.random(in: 0..<40, using: &random))"
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<3:
        nextTicket += 1
        held.hold(item, for: callId, until: nextTicket)
        model.hold(item, callId, nextTicket)
      case 3..<7:
        // Writes nothing: held only behind its call's pending ticket, as the gate does.
        guard let pending = model.pending(callId) else { continue }
        #expect(held.pendingTicket(of: callId) == pending)
        held.hold(item, for: callId, until: pending)
        model.hold(item, callId, pending)
      default:
        committed = min(nextTicket, committed + UInt64(Int.random(in: 0...3, using: &random)))
        #expect(held.release(upTo: committed) == model.release(upTo: committed))
      }
      #expect(held.isEmpty == model.queues.isEmpty)
    }
    #expect(held.release(upTo: nextTicket) == model.release(upTo: nextTicket))
    #expect(held.isEmpty)
  }
}
