import DialtoneCluster
import Testing

/// The ack to a relayed candidate under write-behind: written without a seq, never numbered nor
/// stored, and only once the copies its request caused are stored (virtual time).
@Suite struct WriteBehindUnstoredAnswerBehaviour {
  typealias Holder = WriteBehindHolder
  typealias Effect = WriteBehindHolder.Effect

  let t0 = ContinuousClock.now
  func at(_ seconds: Double) -> Holder.Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

  func frame(_ n: Int) -> SessionLedger.Frame {
    .init(head: Array(#"{"seq":"#.utf8), tail: Array(#","n":\#(n)}"#.utf8))
  }

  func copy(_ session: String, _ n: Int) -> Holder.Outgoing {
    .init(session: session, frame: frame(n), kind: .candidate, once: "c\(n)")
  }

  func ack(_ request: String, of session: String = "alice") -> Holder.UnstoredAnswer {
    .init(session: session, requestID: request, bytes: Array(#"{"replyTo":"\#(request)","type":"ack"}"#.utf8))
  }

  func holding(_ sessions: [String], _ limits: Holder.Limits = .init(lease: .seconds(10), margin: .seconds(2)))
    -> Holder
  {
    var h = Holder(limits: limits, renewedAt: t0)
    for session in sessions {
      _ = h.hold(session, epoch: 7, lastSeq: 0, now: t0)
      _ = h.announced(session, epoch: 7)
    }
    return h
  }

  func answers(_ effects: [Effect]) -> [String] {
    effects.compactMap {
      guard case .answer(let answer) = $0 else { return nil }
      return answer.requestID
    }
  }

  func batch(_ effects: [Effect]) -> WriteBehindBatch? {
    effects.lazy.compactMap {
      guard case .store(let batch) = $0 else { return nil }
      return batch
    }.first
  }

  /// Alice's candidate to Bob, both held here.
  func relay(_ h: inout Holder, _ n: Int, at time: Double = 0) -> Holder.Submitted {
    h.submit([copy("bob", n)], answers: [ack("m\(n)")], now: at(time))
  }

  @Test func theAckWaitsForItsCopysBatchAndIsNeitherNumberedNorStored() {
    var h = holding(["alice", "bob"])
    let submitted = relay(&h, 1)
    #expect(submitted.refusal == nil)
    // Bob's copy is written at once; the ack is not, and the batch carries Bob's frame only.
    #expect(submitted.effects.first == .write(session: "bob", seq: 1, bytes: frame(1).bytes(seq: 1)))
    #expect(answers(submitted.effects) == [])
    #expect(batch(submitted.effects)?.sessions.map(\.id) == ["bob"])
    #expect(batch(submitted.effects)?.frameCount == 1)
    #expect(h.answersWaiting == 1)
    // Stored: the ack goes, and Alice's session numbered nothing.
    #expect(h.batchStored(1, refused: [:], now: at(0.01)) == [.answer(ack("m1"))])
    #expect(h.sessions["alice"]?.next == 1)
    #expect(h.answersWaiting == 0)
  }

  @Test func aBatchThatFailsKeepsTheAckWaitingUntilItIsStored() {
    var h = holding(["alice", "bob"])
    _ = relay(&h, 1)
    #expect(answers(h.batchFailed(1, now: at(0.01))) == [])
    let again = h.tick(now: at(0.5))
    #expect(answers(again) == [])
    #expect(batch(again)?.number == 2)
    #expect(answers(h.batchStored(2, refused: [:], now: at(0.51))) == ["m1"])
  }

  @Test func aLapseDropsTheAcksWaiting() {
    var h = holding(["alice", "bob"])
    _ = relay(&h, 1)
    // No renewal: the lease lapses (at 8 s, the lease less the margin), the sessions close.
    let lapsed = h.tick(now: at(8))
    #expect(lapsed.contains(.close(session: "alice", .stale)))
    #expect(answers(lapsed) == [])
    #expect(h.answersWaiting == 0)
    // The batch sent before lands late: ignored, and no ack goes (Alice resumes and sends again).
    #expect(answers(h.batchStored(1, refused: [:], now: at(8.1))) == [])
    #expect(answers(h.leaseRenewed(sentAt: at(8.2), now: at(8.2))) == [])
  }

  @Test func aPeerResumedElsewhereMeanwhileHasItsCopySentOnBeforeTheAck() {
    var h = holding(["alice", "bob"])
    _ = relay(&h, 1)
    // Another node took Bob: his copy goes there (a Redis step), and the ack only after it.
    #expect(
      h.batchStored(1, refused: ["bob": .superseded], now: at(0.01)) == [
        .close(session: "bob", .refused(.superseded)), .unheld(copy("bob", 1)), .answer(ack("m1")),
      ])
  }

  @Test func aCopyForASessionHeldElsewhereLeavesTheAckToTheStepsBeforeIt() {
    // Bob is not held here: his copy went to Redis as a step of the event (the shell writes the
    // ack behind the steps queued before it), so with nothing else waiting it goes at once.
    var idle = holding(["alice"])
    #expect(idle.submit([], answers: [ack("m1")], now: t0).effects == [.answer(ack("m1"))])
    // With an earlier event unstored, it waits for that one too.
    var busy = holding(["alice", "carol"])
    _ = busy.submit([copy("carol", 9)], now: t0)
    #expect(answers(busy.submit([], answers: [ack("m2")], now: t0).effects) == [])
    #expect(busy.batchStored(1, refused: [:], now: at(0.01)) == [.answer(ack("m2"))])
  }

  @Test func aRepeatedCandidateIsNotStoredTwiceAndItsAckWaitsForTheFirstCopy() {
    var h = holding(["alice", "bob"])
    _ = relay(&h, 1)
    // Alice sends it again (same content: the same once-key) before the first batch landed.
    let again = h.submit([copy("bob", 1)], answers: [ack("m1")], now: at(0.001))
    #expect(again.effects == [], "not numbered again, and the ack waits for the first copy")
    #expect(h.batchStored(1, refused: [:], now: at(0.01)) == [.answer(ack("m1")), .answer(ack("m1"))])
    #expect(h.sessions["bob"]?.next == 2)
  }

  @Test func aRefusedEventWritesNoAck() {
    var h = holding(["alice", "bob"], .init(lease: .seconds(10), margin: .seconds(2), maxSessionFrames: 1))
    _ = relay(&h, 1)
    let refused = relay(&h, 2)
    #expect(refused.refusal == .backlog)
    #expect(answers(refused.effects) == [])
    #expect(h.answersWaiting == 1)
    #expect(answers(h.batchStored(1, refused: [:], now: at(0.01))) == ["m1"])
  }
}
