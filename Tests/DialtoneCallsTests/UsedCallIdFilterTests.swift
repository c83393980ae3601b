import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// The filter of used call ids: never "never used" for an id it was given, through its growth
/// and once full; and the desk deciding a fresh id with it, asking the history only for an id the
/// filter may hold.
struct UsedCallIdFilterTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  @Test func everyIdAddedIsMaybeThroughItsGrowth() {
    var filter = UsedCallIdFilter(expected: 4096)
    let added = (0..<20_000).map { "call-\($0)" }
    for id in added { filter.insert(id) }
    #expect(filter.stageCount > 1)
    #expect(added.allSatisfy { filter.mayContain($0) })
    // Ids never added are mostly "certainly not": the rate stays under twice the first stage's
    // (0.5 %); 5 % is far from any run's count (the hasher's seed changes per process).
    let fresh = (0..<10_000).filter { filter.mayContain("fresh-\($0)") }.count
    #expect(fresh < 500, "\(fresh) false positives in 10,000")
  }

  @Test func aFullFilterAnswersMaybeForEveryId() {
    var filter = UsedCallIdFilter(expected: 4096, maxIds: 100)
    for i in 0...100 { filter.insert("call-\(i)") }
    #expect(filter.isFull)
    #expect((0..<1000).allSatisfy { filter.mayContain("fresh-\($0)") })
    // Still so for ids added once full (they are not kept).
    filter.insert("late")
    #expect(filter.mayContain("late") && filter.isFull)
  }

  @Test func aHistoryOfAMillionCallsTakesUnderThreeMegabytes() {
    // What docs/benchmarks.md states: sized at start-up for twice a history of a million.
    let filter = UsedCallIdFilter(expected: 2_000_000)
    #expect(filter.bytes > 2_500_000 && filter.bytes < 3_000_000, "\(filter.bytes) bytes")
  }

  private func invite(_ callId: CallID) -> ClientMessage {
    .invite(.init(callId: callId, to: "bob", video: false))
  }

  /// The desk asks the history about `callId` and, told it was used, refuses it with `conflict`.
  private func expectAskedAndRefused(_ desk: CallDesk, _ callId: CallID, request: String, at now: Date) {
    guard case .needsHistory(callId) = desk.handle(invite(callId), id: request, from: alice, now: now) else {
      Issue.record("\(callId) was decided without the history")
      return
    }
    let refused = desk.handle(invite(callId), id: request, from: alice, now: now, history: .checked(callId, used: true))
    guard case .outcome(let outcome, _) = refused else {
      Issue.record("\(callId) was not decided once the history answered")
      return
    }
    #expect(outcome.reply.errorCode == .conflict)
  }

  @Test func aFreshIdIsDecidedWithoutTheHistoryAndIsThenAskedAbout() {
    let desk = CallDesk(
      router: CallRouter(), groups: GroupCallRouter(), groupCalls: true, usedIds: UsedCallIdFilter(expected: 4096))
    guard case .outcome(let started, .running("c1", _)) = desk.handle(invite("c1"), id: "i1", from: alice, now: t0)
    else {
      Issue.record("a fresh id was not decided at once")
      return
    }
    #expect(started.reply.isAck)
    #expect(desk.handle(.cancel(.init(callId: "c1")), id: "x", from: alice, now: t0).isOutcome)
    // Long after, the router has forgotten the call: the filter has not, the history is asked.
    expectAskedAndRefused(desk, "c1", request: "i2", at: t0.addingTimeInterval(3600))
    // A group call's fresh id too, and it is then held like the 1:1 ids.
    #expect(desk.handle(.groupCreate(.init(callId: "g1", members: ["bob"])), id: "g", from: alice, now: t0).isOutcome)
    #expect(desk.usedIds?.mayContain("g1") == true)
  }

  @Test func anIdTheFilterWasBuiltWithIsAskedAboutAndRefused() {
    // As after a restart: the filter read from the store holds the id of a call long ended.
    var usedIds = UsedCallIdFilter(expected: 4096)
    usedIds.insert("old")
    let desk = CallDesk(router: CallRouter(), groups: GroupCallRouter(), groupCalls: true, usedIds: usedIds)
    expectAskedAndRefused(desk, "old", request: "i", at: t0)
  }

  @Test func aFullFilterOrNoneAsksAboutEveryNewId() {
    var full = UsedCallIdFilter(expected: 4096, maxIds: 0)
    full.insert("x")
    for usedIds in [full, nil] {
      let desk = CallDesk(router: CallRouter(), groups: GroupCallRouter(), groupCalls: true, usedIds: usedIds)
      guard case .needsHistory("c1") = desk.handle(invite("c1"), id: "i", from: alice, now: t0) else {
        Issue.record("decided without the history (filter \(usedIds == nil ? "none" : "full"))")
        continue
      }
    }
  }
}

extension CallDesk.Decision {
  fileprivate var isOutcome: Bool {
    if case .outcome = self { return true }
    return false
  }
}
