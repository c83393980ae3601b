import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

/// A live-call store whose call-id lookups wait until released (a database that went slow).
final class StallingLiveCallStore: LiveCallStore {
  let base: any LiveCallStore
  private let gate = Locked<(open: Bool, waiting: [CheckedContinuation<Void, Never>], asked: [CallID])>(
    (false, [], []))

  init(_ base: any LiveCallStore) { self.base = base }

  var asked: [CallID] { gate.current.asked }

  func release() {
    let waiting = gate.withLock { state in
      state.open = true
      defer { state.waiting = [] }
      return state.waiting
    }
    for continuation in waiting { continuation.resume() }
  }

  func isCallIdUsed(_ callId: CallID) async throws -> Bool {
    await withCheckedContinuation { continuation in
      let proceed = gate.withLock {
        $0.asked.append(callId)
        if !$0.open { $0.waiting.append(continuation) }
        return $0.open
      }
      if proceed { continuation.resume() }
    }
    return try await base.isCallIdUsed(callId)
  }

  func write(_ changes: [LiveCallChange]) throws { try base.write(changes) }
  func liveCalls() throws -> [StoredLiveCall] { try base.liveCalls() }
  func completeInterruptedGroupCalls() throws -> Int { try base.completeInterruptedGroupCalls() }
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try base.callsEnded(since: since) }
}

/// Issue 37, item 2: nothing blocks the network thread. A call-id lookup the database is slow to
/// answer holds only the session that asked (its later requests wait behind it, in order);
/// every other socket is served meanwhile.
@Suite(.serialized)
struct StalledStoreTests {
  @Test func aSlowCallIdLookupHoldsOnlyTheSessionThatAsked() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-stall-\(UUID().uuidString)"
    let store = StallingLiveCallStore(try SQLiteLiveCallStore.open(dataDirectory: directory))
    let server = try await TestServer(dataDirectory: directory, liveCalls: store)
    try await server.stopping {
      let alice = try await server.connect("alice")
      let bob = try await server.connect("bob")
      let carol = try await server.connect("carol")
      let dave = try await server.connect("dave")

      // Alice's invite waits for the store; so do the candidates she sends after it.
      alice.send(ClientEnvelope(id: "i1", message: .invite(.init(callId: "stalled-1", to: "bob", video: false))))
      alice.send(
        ClientEnvelope(
          id: "c1", message: .candidate(.init(callId: "stalled-1", candidate: IceCandidate(candidate: "candidate:1")))))
      alice.send(
        ClientEnvelope(
          id: "c2", message: .candidate(.init(callId: "stalled-1", candidate: IceCandidate(candidate: "candidate:2")))))
      #expect(await eventually { store.asked == ["stalled-1"] })

      // Everyone else goes on: pings, and a call of their own whose id the store is not asked
      // about again meanwhile (Carol's own lookup waits too, but not Dave's ping behind it).
      #expect(try await bob.request(.ping(.init())).isAck)
      #expect(try await dave.request(.ping(.init())).isAck)
      carol.send(ClientEnvelope(id: "i2", message: .invite(.init(callId: "stalled-2", to: "dave", video: false))))
      #expect(await eventually { store.asked.count == 2 })
      #expect(try await dave.request(.ping(.init())).isAck)

      store.release()
      // Alice's answers come in the order she sent the requests; Bob rings.
      let answers = [try await alice.next(), try await alice.next(), try await alice.next()]
      #expect(answers.map(\.message.replyTo) == ["i1", "c1", "c2"])
      #expect(answers.allSatisfy { $0.message.isAck })
      _ = try await bob.expect(.invite)
      #expect(try await carol.next().message.replyTo == "i2")
      _ = try await dave.expect(.invite)
    }
  }

  @Test func aLookupTheStoreCannotAnswerIsRefusedAndNothingWaitsForever() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-stall-\(UUID().uuidString)"
    final class Failing: LiveCallStore {
      let base: any LiveCallStore
      init(_ base: any LiveCallStore) { self.base = base }
      struct Down: Error {}
      func isCallIdUsed(_ callId: CallID) async throws -> Bool { throw Down() }
      func write(_ changes: [LiveCallChange]) throws { try base.write(changes) }
      func liveCalls() throws -> [StoredLiveCall] { try base.liveCalls() }
      func completeInterruptedGroupCalls() throws -> Int { try base.completeInterruptedGroupCalls() }
      func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try base.callsEnded(since: since) }
    }
    let server = try await TestServer(
      dataDirectory: directory, liveCalls: Failing(try SQLiteLiveCallStore.open(dataDirectory: directory)))
    try await server.stopping {
      let alice = try await server.connect("alice")
      alice.send(ClientEnvelope(id: "i1", message: .invite(.init(callId: "down-1", to: "bob", video: false))))
      alice.send(ClientEnvelope(id: "p1", message: .ping(.init())))
      let refused = try await alice.next().message
      #expect(refused.replyTo == "i1" && refused.errorCode == .internal)
      #expect(try await alice.next().message.replyTo == "p1")
    }
  }
}
