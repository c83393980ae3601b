import DialtoneCluster
import DialtoneSessions
import DialtoneSupport
import Foundation
import Testing

extension RedisTests.WriteBehindForwardedReplies {
  /// Several events' answers waiting when the lease lapses (`WaitingQueue.takeAfter`, one pass):
  /// every one is dropped, in the order they waited, none goes, and the count of those waiting
  /// is back to nothing, so that the bound counts from zero after.
  @Test func everyAnswerWaitingAtALapseIsDroppedInOrderAndTheCountEmpties() throws {
    let rig = try rig(maxWaitingReplies: 8)
    defer { rig.close() }
    let answers = Answers()
    func bob(_ id: String) -> RefusedRequest { RefusedRequest(sessionID: "bob-session", requestID: id) }
    rig.shell.add(copy(rig, 1))
    rig.shell.flush(replies: answers.replies("r1", rig))
    rig.shell.flush(replies: answers.replies(["r2", "r3"], rig))
    rig.shell.add(copy(rig, 2))
    rig.shell.flush(replies: answers.replies("r4", rig))
    #expect(rig.shell.repliesWaiting == 4)
    rig.advance(by: .seconds(600))
    #expect(rig.hub.dropped.current == [bob("r1"), bob("r2"), bob("r3"), bob("r4")])
    #expect(rig.shell.repliesWaiting == 0)
    #expect(rig.overBound.current == 0)
    #expect(answers.arrived.wait(timeout: .now() + 0.3) == .timedOut)
    #expect(answers.ids == [])
  }
}
