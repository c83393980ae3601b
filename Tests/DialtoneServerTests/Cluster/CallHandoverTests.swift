import DialtoneCalls
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

/// Handing a 1:1 call from one node to another (a draining node's calls, issue 19): the call
/// leaves the first as it is, and the second carries on from the journal with its deadlines.
struct CallHandoverTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func snapshot(_ effects: [CallEffect]) -> LiveCallSnapshot? {
    effects.compactMap {
      if case .persist(.put(let s)) = $0 { return s }
      return nil
    }.last
  }

  @Test func aRelinquishedCallLeavesAsItIsAndAnotherRouterEndsItAtItsDeadline() throws {
    var first = CallRouter()
    let invited = first.handle(
      .invite(.init(callId: "h1", to: "bob", video: false, offer: SessionDescription(sdp: "v=0"))), id: "i",
      from: alice, now: t0)
    let stored = StoredLiveCall(snapshot: try #require(snapshot(invited.effects)), callerSignals: [])

    let effects = first.relinquish("h1")
    // Only its timers here stop: nothing is written, nobody is told.
    #expect(effects.allSatisfy { if case .cancel = $0 { true } else { false } })
    #expect(effects.contains { if case .cancel(CallTimer(callId: "h1", kind: .ring)) = $0 { true } else { false } })
    #expect(first.callState("h1", visibleTo: alice) == nil)
    #expect(first.liveCalls.isEmpty)
    #expect(first.relinquish("h1").isEmpty)  // already gone
    #expect(first.relinquish("unknown").isEmpty)

    var second = CallRouter()
    let adopted = second.restore([stored], now: t0.addingTimeInterval(10))
    let ring = adopted.compactMap { effect -> Duration? in
      if case .schedule(CallTimer(callId: "h1", kind: .ring), let delay) = effect { return delay }
      return nil
    }
    #expect(ring == [.seconds(35)], "the ring deadline is the original one, 45 s after the invite")
    let ended = second.timerFired(CallTimer(callId: "h1", kind: .ring), now: t0.addingTimeInterval(45))
    let records = ended.compactMap { effect -> CallRecord? in
      if case .persist(.ended(let record, _, _)) = effect { return record }
      return nil
    }
    #expect(records.map(\.endReason) == [.missed])
  }

  /// A device that started a new session while its call had no owner reached nobody: the node
  /// adopting the call sends the ring to the callee and the accept to the caller again.
  @Test func anAdoptedCallCatchesItsDevicesUpOnTheRingAndTheAccept() throws {
    let bob = Identity(userId: "bob", deviceId: "tablet", name: nil)
    var first = CallRouter()
    let ringing = first.handle(
      .invite(.init(callId: "r1", to: "bob", video: false, offer: SessionDescription(sdp: "v=0"))), id: "i",
      from: alice, now: t0)
    let answered = first.handle(
      .invite(.init(callId: "r2", to: "bob", video: false, offer: SessionDescription(sdp: "v=0"))), id: "j",
      from: alice, now: t0)
    let accepted = first.handle(
      .accept(.init(callId: "r2", answer: SessionDescription(sdp: "v=0 answer"))), id: "a", from: bob, now: t0)
    let stored = [
      StoredLiveCall(snapshot: try #require(snapshot(ringing.effects)), callerSignals: []),
      StoredLiveCall(snapshot: try #require(snapshot(answered.effects + accepted.effects)), callerSignals: []),
    ]
    var second = CallRouter()
    _ = second.restore(stored, now: t0.addingTimeInterval(2))
    let sent = second.catchUp(["r1", "r2", "unknown"]).compactMap { effect -> String? in
      guard case .send(let message, let recipient) = effect else { return nil }
      switch (message, recipient) {
      case (.invite(let m), .user("bob", nil)): return "invite \(m.callId) to bob"
      case (.accept(let m), .device("alice", "phone")): return "accept \(m.callId) to alice"
      default: return "\(message.typeName) elsewhere"
      }
    }
    #expect(sent == ["invite r1 to bob", "accept r2 to alice"])
    #expect(first.catchUp(["r1"]).count == 1, "the router that ran it has the same ring to send")
  }

  @Test func anEndedCallIsNotHandedOver() {
    var router = CallRouter()
    _ = router.handle(.invite(.init(callId: "h2", to: "bob", video: false)), id: "i", from: alice, now: t0)
    _ = router.handle(.cancel(.init(callId: "h2")), id: "c", from: alice, now: t0)
    #expect(router.relinquish("h2").isEmpty)
    #expect(router.callState("h2", visibleTo: alice)?.state == .ended)
  }

  /// A call whose latest change is not on disk yet stays: the node adopting it would read the
  /// change before it.
  @Test func aCallWithAJournalWritePendingIsHandedOverOnlyOnceItIsOnDisk() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-handover-\(UUID().uuidString)"
    let store = try GatedLiveCallStore(dataDirectory: directory)
    let server = try await TestServer(dataDirectory: directory, liveCalls: store)
    let alice = try await server.connect("alice")
    let call = "handover-\(UUID().uuidString)"
    alice.send(ClientEnvelope(id: "i1", message: .invite(.init(callId: call, to: "bob", video: false))))
    #expect(try await alice.request(.ping(.init())).isAck)  // the invite was handled, its write is held
    #expect(await server.server.hub.relinquish([call]).isEmpty)
    store.letWritesThrough()
    #expect(try await alice.next("invite's ack").message.replyTo == "i1")
    #expect(await server.server.hub.relinquish([call]) == [call])
    await server.stop()
  }

  /// Through a real server and its journal: handed over, the call is gone from this hub; adopted
  /// back from the journal, it rings on and ends missed at its original deadline.
  @Test func aHubHandsACallOverAndAdoptsItBackFromTheJournal() async throws {
    let server = try await TestServer()
    let alice = try await server.connect("alice")
    let call = "handover-\(UUID().uuidString)"
    #expect(try await alice.invite(call, to: "bob").isAck)  // on disk once acknowledged
    let hub = server.server.hub
    #expect(await hub.relinquish([call]) == [call])
    #expect(try await alice.act(.getCall(.init(callId: call))).errorCode == .notFound)

    let journal = try SQLiteLiveCallStore.open(dataDirectory: server.dataDirectory)
    let stored = try journal.liveCalls().filter { $0.snapshot.callId == call }
    #expect(stored.count == 1)
    await hub.adopt(stored)
    guard case .ack(let state) = try await alice.act(.getCall(.init(callId: call))) else {
      Issue.record("get-call after the adoption did not answer")
      await server.stop()
      return
    }
    #expect(state.call?.state == .ringing)
    let scheduled = await eventually { server.clock.pendingDeadlines.contains { abs($0 - 45) < 0.001 } }
    #expect(scheduled)
    server.clock.advance(by: 45)
    guard case .callEnded(let ended) = try await alice.expect(.callEnded) else { return }
    #expect(ended.reason == .missed)
    await server.stop()
  }
}
