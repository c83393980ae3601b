import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// The desk alone: one id space for 1:1 and group calls, the history asked for (never read) when
/// an id is new, and its answer honoured.
struct CallDeskTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let bob = Identity(userId: "bob", deviceId: "phone", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func desk(groupCalls: Bool = true) -> CallDesk {
    CallDesk(router: CallRouter(), groups: GroupCallRouter(), groupCalls: groupCalls)
  }

  private func outcome(_ decision: CallDesk.Decision) -> CallRouter.Outcome? {
    if case .outcome(let outcome, _) = decision { return outcome }
    return nil
  }

  @Test func aNewCallIdIsCheckedAgainstTheHistoryBeforeTheCallStarts() {
    let desk = desk()
    let invite = ClientMessage.invite(.init(callId: "c1", to: "bob", video: false))
    guard case .needsHistory("c1") = desk.handle(invite, id: "i1", from: alice, now: t0) else {
      Issue.record("the desk decided without the history")
      return
    }
    #expect(!desk.runs("c1"))
    let started = desk.handle(invite, id: "i1", from: alice, now: t0, history: .checked("c1", used: false))
    guard case .outcome(let ack, .running("c1", let users)) = started else {
      Issue.record("not started: \(started)")
      return
    }
    #expect(users == ["alice", "bob"])
    #expect(ack.effects.contains { if case .persist(.put) = $0 { true } else { false } })
    // A repeat is the router's to answer now: no second question.
    guard case .outcome = desk.handle(invite, id: "i2", from: alice, now: t0) else {
      Issue.record("asked again about a call it runs")
      return
    }
  }

  @Test func anIdTheHistoryHasIsRefusedAndAStoreThatCannotAnswerSaysSo() {
    let desk = desk()
    let invite = ClientMessage.invite(.init(callId: "old", to: "bob", video: false))
    let used = outcome(desk.handle(invite, id: "i", from: alice, now: t0, history: .checked("old", used: true)))
    #expect(used?.reply.errorCode == .conflict)
    let down = outcome(desk.handle(invite, id: "i", from: alice, now: t0, history: .unavailable("old")))
    #expect(down?.reply.errorCode == .internal)
    // An answer about another id is no answer about this one.
    guard
      case .needsHistory("old") = desk.handle(
        invite, id: "i", from: alice, now: t0, history: .checked("x", used: false))
    else {
      Issue.record("took another id's answer")
      return
    }
  }

  @Test func oneIdNamesOneCallOfEitherKind() {
    let desk = desk()
    _ = desk.handle(
      .invite(.init(callId: "c1", to: "bob", video: false)), id: "i", from: alice, now: t0,
      history: .checked("c1", used: false))
    let group = outcome(
      desk.handle(.groupCreate(.init(callId: "c1", members: ["bob"])), id: "g", from: alice, now: t0))
    #expect(group?.reply.errorCode == .conflict)
    _ = desk.handle(
      .groupCreate(.init(callId: "g1", members: ["bob"])), id: "g", from: alice, now: t0,
      history: .checked("g1", used: false))
    let invite = outcome(
      desk.handle(.invite(.init(callId: "g1", to: "bob", video: false)), id: "i", from: bob, now: t0))
    #expect(invite?.reply.errorCode == .conflict)
  }

  @Test func withoutAnSFUGroupCallsAreRefusedClearly() {
    let desk = desk(groupCalls: false)
    let refused = outcome(
      desk.handle(.groupCreate(.init(callId: "g1", members: ["bob"])), id: "g", from: alice, now: t0))
    #expect(refused?.reply.errorCode == .invalidState)
  }

  @Test func aDeviceThatEntersTheMediaRoomWithoutBeingInTheCallIsTakenOut() {
    let desk = desk()
    _ = desk.handle(
      .groupCreate(.init(callId: "g1", members: ["bob"])), id: "g", from: alice, now: t0,
      history: .checked("g1", used: false))
    #expect(desk.participantEnteredMedia("g1", alice).isEmpty)
    #expect(desk.participantEnteredMedia("g1", bob) == [.sfu(.leave(callId: "g1", participant: bob))])
  }

  @Test func aGroupCallsChangesAreWrittenWithTheRecordItWouldLeave() {
    let desk = desk()
    let created = outcome(
      desk.handle(
        .groupCreate(.init(callId: "g1", members: ["bob"])), id: "g", from: alice, now: t0,
        history: .checked("g1", used: false)))
    #expect(created?.effects.contains { if case .persist(.groupLive) = $0 { true } else { false } } == true)
    let ended = outcome(desk.handle(.groupEnd(.init(callId: "g1")), id: "e", from: alice, now: t0))
    #expect(ended?.effects.contains { if case .persist(.groupEnded) = $0 { true } else { false } } == true)
  }
}
