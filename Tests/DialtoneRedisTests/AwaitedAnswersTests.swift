import DialtoneCalls
import DialtoneCluster
import DialtoneProtocol
import DialtoneSessions
import Testing

@Suite struct AwaitedAnswersBehaviour {
  private let start = ContinuousClock.now
  private let bob = Identity(userId: "bob", deviceId: "phone", name: nil)

  private func request(_ id: String) -> ForwardedRequest {
    ForwardedRequest(
      message: .accept(.init(callId: "c-1", answer: .init(sdp: "v=0\r\n"))), id: id, from: bob,
      origin: .init(node: "n2", sessionID: "s_bob"))
  }

  private func awaited() -> AwaitedAnswers { AwaitedAnswers(wait: .seconds(4), maxAttempts: 3, capacity: 4) }

  /// The race behind a node answering a request twice: the owner answered, and this node's
  /// reader took the answer in, before the send returned to the thread that sent it. Awaited
  /// from before the send, nothing is left to route again.
  @Test func anAnswerThatCameBeforeTheSendReturnedLeavesNothingOverdue() {
    var answers = awaited()
    let accept = request("r2")
    let new = answers.sending(accept, at: start)
    #expect(new)
    answers.answered(ForwardedAnswers.key(accept))
    // The send returns now: the letter went.
    let overdue = answers.overdue(at: start + .seconds(60))
    #expect(overdue.retry.isEmpty && overdue.expired.isEmpty)
    #expect(answers.count == 0)
  }

  @Test func anUnansweredRequestIsRoutedAgainWhenOverdueAndGivenUpAfterItsAttempts() {
    var answers = awaited()
    let accept = request("r2")
    _ = answers.sending(accept, at: start)
    let early = answers.overdue(at: start + .seconds(3))
    #expect(early.retry.isEmpty)
    let due = answers.overdue(at: start + .seconds(4))
    #expect(due.retry == [accept])
    // Routed again: awaited again from then, its attempts kept.
    let again = answers.sending(accept, at: start + .seconds(4))
    #expect(!again)
    let second = (answers.overdue(at: start + .seconds(7)), answers.overdue(at: start + .seconds(8)))
    #expect(second.0.retry.isEmpty && second.1.retry == [accept])
    let last = answers.overdue(at: start + .seconds(12))
    #expect(last.retry.isEmpty && last.expired == [accept])
    #expect(answers.count == 0)
  }

  @Test func aLetterThatDidNotGoIsNotAwaitedButARetrysStaysAwaited() {
    var answers = awaited()
    let (first, second) = (request("r1"), request("r2"))
    let new = answers.sending(first, at: start)
    #expect(new)
    answers.notSent(first)
    #expect(answers.count == 0)
    _ = answers.sending(second, at: start)
    _ = answers.overdue(at: start + .seconds(4))
    // The retry's send reports it was awaited already: the caller keeps it when that send fails.
    let again = answers.sending(second, at: start + .seconds(4))
    #expect(!again)
    #expect(answers.count == 1)
  }

  @Test func pastItsCapacityARequestGoesUnwatched() {
    var answers = awaited()
    let watched = (1...5).map { answers.sending(request("r\($0)"), at: start) }
    #expect(watched == [true, true, true, true, false])
    #expect(answers.count == 4)
    let due = answers.overdue(at: start + .seconds(4))
    #expect(due.retry.count == 4)
  }
}
