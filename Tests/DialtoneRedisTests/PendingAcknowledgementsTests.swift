import DialtoneCluster
import Testing

@Suite struct PendingAcknowledgementsBehaviour {
  @Test func eachSessionKeepsItsHighestAcknowledgementUntilTaken() {
    let pending = PendingAcknowledgements()
    #expect(!pending.note("b", through: 3))
    #expect(!pending.note("a", through: 5))
    #expect(!pending.note("a", through: 4))  // a late, lower ack changes nothing
    #expect(!pending.note("a", through: 7))
    let taken = pending.take()
    #expect(taken.map(\.session) == ["a", "b"])
    #expect(taken.map(\.through) == [7, 3])
    #expect(pending.isEmpty)
  }

  @Test func whatCouldNotBeStoredComesBackUnderALaterAck() {
    let pending = PendingAcknowledgements()
    _ = pending.note("a", through: 5)
    let failed = pending.take()
    _ = pending.note("a", through: 9)
    pending.restore(failed)
    pending.restore([(session: "b", through: 2)])
    let taken = pending.take()
    #expect(taken.map(\.session) == ["a", "b"])
    #expect(taken.map(\.through) == [9, 2])
  }

  @Test func anEndedSessionIsForgotten() {
    let pending = PendingAcknowledgements()
    _ = pending.note("a", through: 5)
    pending.forget("a")
    #expect(pending.isEmpty)
  }

  @Test func tooManySessionsWaitingAskToBeStoredAtOnce() {
    let pending = PendingAcknowledgements()
    for index in 0..<(PendingAcknowledgements.maxSessions - 1) { #expect(!pending.note("s\(index)", through: 1)) }
    #expect(pending.note("last", through: 1))
    #expect(pending.take().count == PendingAcknowledgements.maxSessions)
  }
}
