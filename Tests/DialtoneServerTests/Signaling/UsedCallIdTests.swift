import DialtoneCalls
import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer
@testable import DialtoneStorage

/// A single server decides a fresh call id with its filter of used ids, without asking the store;
/// a reused id is refused as before, asked about, also after a restart rebuilt the filter; a
/// store that offers no filter (a cluster's, PostgreSQL's) is asked about every new id.
@Suite(.serialized) struct UsedCallIdTests {
  @Test func aFreshIdStartsACallWithoutTheStoreAndAReusedOneIsRefusedAfterARestart() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-used-ids-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var store = try CountingLiveCallStore(dataDirectory: directory, offersFilter: true)
    var server = try await TestServer(dataDirectory: directory, liveCalls: store)
    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let call = callID()
    #expect(try await alice.invite(call, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(store.lookups == 0)
    #expect(try await alice.act(.cancel(.init(callId: call))).isAck)
    _ = try await bob.expect(.callEnded)
    // Long gone from the router: the filter holds the id, the store is asked and says used.
    server.clock.advance(by: 3600)
    let carol = try await server.connect("carol")
    #expect(try await carol.invite(call, to: "bob").errorCode == .conflict)
    #expect(store.lookups == 1)
    await server.server.stop()
    await server.client.shutdown()

    // Restarted: the filter is read again from the store, which holds the id.
    store = try CountingLiveCallStore(dataDirectory: directory, offersFilter: true)
    server = try await TestServer(dataDirectory: directory, liveCalls: store)
    server.clock.advance(by: 3600)  // the call is not among the recently ended it restores
    let alice2 = try await server.connect("alice")
    let bob2 = try await server.connect("bob")
    #expect(try await alice2.invite(call, to: "bob").errorCode == .conflict)
    #expect(store.lookups == 1)
    #expect(try await alice2.invite(callID(), to: "bob").isAck)
    _ = try await bob2.expect(.invite)
    #expect(store.lookups == 1)
    await server.stop()
  }

  @Test func aStoreWithoutAFilterIsAskedAboutEveryNewId() async throws {
    let directory = NSTemporaryDirectory() + "dialtone-used-ids-\(UUID().uuidString)"
    let store = try CountingLiveCallStore(dataDirectory: directory, offersFilter: false)
    let server = try await TestServer(dataDirectory: directory, liveCalls: store)
    let alice = try await server.connect("alice")
    _ = try await server.connect("bob")
    #expect(try await alice.invite(callID(), to: "bob").isAck)
    #expect(try await alice.invite(callID(), to: "bob").isAck)
    #expect(store.lookups == 2)
    await server.stop()
  }
}

/// The SQLite store, counting its call-id look-ups; with or without its filter of used ids.
final class CountingLiveCallStore: LiveCallStore, @unchecked Sendable {
  // @unchecked: `count` is touched only under its lock.
  private let inner: SQLiteLiveCallStore
  private let offersFilter: Bool
  private let count = Locked(0)

  init(dataDirectory: String, offersFilter: Bool) throws {
    inner = try SQLiteLiveCallStore.open(dataDirectory: dataDirectory)
    self.offersFilter = offersFilter
  }

  var lookups: Int { count.withLock { $0 } }

  func write(_ changes: [LiveCallChange]) throws { try inner.write(changes) }
  func liveCalls() throws -> [StoredLiveCall] { try inner.liveCalls() }
  func completeInterruptedGroupCalls() throws -> Int { try inner.completeInterruptedGroupCalls() }
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try inner.callsEnded(since: since) }
  func usedCallIds() throws -> UsedCallIdFilter? { offersFilter ? try inner.usedCallIds() : nil }
  func isCallIdUsed(_ callId: CallID) async throws -> Bool {
    count.withLock { $0 += 1 }
    return try await inner.isCallIdUsed(callId)
  }
}
