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
