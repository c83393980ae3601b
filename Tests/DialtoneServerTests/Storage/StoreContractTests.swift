import DialtoneCalls
import DialtoneProtocol
import DialtonePush
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

/// What every store promises, checked against SQLite and PostgreSQL alike: the same calls give
/// the same answers, in the same order, on both.
@Suite(.scratchPostgres, .serialized) struct StoreContractTests {
  static func record(
    _ callId: CallID, from caller: String = "alice", to callee: String = "bob", at createdAt: Int64,
    blocked: Bool? = nil
  ) -> CallRecord {
    CallRecord(
      callId: callId, callerId: caller, calleeId: callee, answeredBy: "laptop", video: false, createdAt: createdAt,
      answeredAt: createdAt + 100, endedAt: createdAt + 5000, endReason: .hangup, durationMs: 4900, blocked: blocked)
  }

  /// Writes ended calls the way the journal does.
  static func end(_ records: [(CallRecord, blocked: Bool)], in live: any LiveCallStore) throws {
    try live.write(records.map { .ended($0.0, callerDevice: "phone", blocked: $0.blocked) })
  }
}

extension StoreContractTests {
  @Suite struct Devices {
    @Test(arguments: StoreBackend.allCases) func tokensMoveBetweenInstallationsAndEmptyOnesAreForgotten(
      _ backend: StoreBackend
    ) async throws {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let store = try await rig.store()
      let voip = PushToken(kind: .voip, token: "v1", topic: "com.example.app", environment: "production")
      let alert = PushToken(kind: .alert, token: "a1", topic: "com.example.app", environment: "production")
      let fcm = PushToken(kind: .fcm, token: "f1")
      let first = try await store.upsert(
        installationId: "i2", platform: .ios, tokens: [voip, alert], userId: "alice", deviceId: "phone", now: 10)
      #expect(first.tokens == [voip, alert] && first.updatedAt == 10)
      _ = try await store.upsert(
        installationId: "i1", platform: .android, tokens: [fcm], userId: "alice", deviceId: "tablet", now: 11)
      let listed = try await store.devices(of: "alice")
      #expect(listed.map(\.installationId) == ["i1", "i2"])
      // Tokens come back by kind.
      #expect(listed.last?.tokens == [alert, voip])
      #expect(listed.last?.platform == .ios && listed.last?.deviceId == "phone")

      // A registration replaces the installation's tokens and details as a whole.
      _ = try await store.upsert(
        installationId: "i2", platform: .ios, tokens: [voip], userId: "alice", deviceId: "phone2", now: 12)
      #expect(try await store.devices(of: "alice").last == first.with(tokens: [voip], deviceId: "phone2", at: 12))

      // The same phone, another user: the token moves, and alice's installation that held only
      // it is forgotten.
      _ = try await store.upsert(
        installationId: "j1", platform: .ios, tokens: [voip], userId: "bob", deviceId: "phone", now: 13)
      #expect(try await store.devices(of: "alice").map(\.installationId) == ["i1"])
      #expect(try await store.devices(of: "bob").map(\.tokens) == [[voip]])

      // An invalid token reported by the provider goes, and so does the installation it emptied.
      try await store.removeToken("f1", kind: .fcm)
      try await store.removeToken("unknown", kind: .fcm)
      #expect(try await store.devices(of: "alice").isEmpty)

      #expect(try await store.remove(installationId: "j1", userId: "bob"))
      #expect(try await !store.remove(installationId: "j1", userId: "bob"))
      #expect(try await !store.remove(installationId: "i1", userId: "carol"))
      #expect(try await store.devices(of: "bob").isEmpty)
      // The removed installation's token is free for another one.
      _ = try await store.upsert(
        installationId: "k1", platform: .ios, tokens: [voip], userId: "carol", deviceId: "phone", now: 14)
      #expect(try await store.devices(of: "carol").count == 1)
    }
  }

  @Suite struct History {
    @Test(arguments: StoreBackend.allCases) func pagesWithEqualTimestampsAndCursorsNewestFirst(
      _ backend: StoreBackend
    ) async throws {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let live = try await rig.liveCalls()
      try StoreContractTests.end(
        [
          (StoreContractTests.record("c1", at: 1000), false), (StoreContractTests.record("c2", at: 2000), false),
          (StoreContractTests.record("c3", at: 2000), false), (StoreContractTests.record("c4", at: 2000), false),
          (StoreContractTests.record("c5", at: 3000), false),
          (StoreContractTests.record("c6", from: "bob", to: "alice", at: 2000), false),
          (StoreContractTests.record("c7", from: "carol", to: "dave", at: 2500), false),
        ], in: live)
      let store = try await rig.store()
      var pages: [[CallID]] = []
      var cursor: HistoryCursor?
      while true {
        let page = try await store.history(of: "alice", limit: 2, before: cursor)
        guard let last = page.last else { break }
        pages.append(page.map(\.callId))
        cursor = HistoryCursor(createdAt: last.createdAt, callId: last.callId)
      }
      #expect(pages == [["c5", "c6"], ["c4", "c3"], ["c2", "c1"]])
      #expect(
        try await store.history(of: "alice", limit: 10, before: nil).first == StoreContractTests.record("c5", at: 3000))
      #expect(
        try await store.history(of: "bob", limit: 10, before: HistoryCursor(createdAt: 2000, callId: "c4")).map(
          \.callId)
          == ["c3", "c2", "c1"])
      #expect(try await store.history(of: "nobody", limit: 10, before: nil).isEmpty)
    }

    @Test(arguments: StoreBackend.allCases) func aBlockedCallIsTheCallersAloneUnlessShown(_ backend: StoreBackend)
      async throws
    {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let live = try await rig.liveCalls()
      try StoreContractTests.end(
        [
          (StoreContractTests.record("ok", from: "mallory", to: "bob", at: 1000), false),
          (StoreContractTests.record("silenced", from: "mallory", to: "bob", at: 2000), true),
        ], in: live)
      let store = try await rig.store()
      #expect(try await store.history(of: "bob", limit: 10, before: nil, blocked: .hide).map(\.callId) == ["ok"])
      let shown = try await store.history(of: "bob", limit: 10, before: nil, blocked: .show)
      #expect(shown.map(\.callId) == ["silenced", "ok"])
      #expect(shown.map(\.blocked) == [true, nil])
      // The blocked caller sees the call either way, unmarked.
      let caller = try await store.history(of: "mallory", limit: 10, before: nil, blocked: .hide)
      #expect(caller.map(\.callId) == ["silenced", "ok"] && caller.allSatisfy { $0.blocked == nil })

      #expect(try await store.call("silenced", visibleTo: "bob", blocked: .hide) == nil)
      #expect(try await store.call("silenced", visibleTo: "bob", blocked: .show)?.blocked == true)
      #expect(
        try await store.call("silenced", visibleTo: "mallory", blocked: .hide)
          == StoreContractTests.record("silenced", from: "mallory", to: "bob", at: 2000))
      #expect(try await store.call("silenced", visibleTo: "carol", blocked: .show) == nil)
      #expect(try await store.call("missing", visibleTo: "bob", blocked: .show) == nil)
    }

    @Test(arguments: StoreBackend.allCases) func groupHistoryPagesAndHidesWhatAMembersBlockSilenced(
      _ backend: StoreBackend
    ) async throws {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      func group(_ id: CallID, at createdAt: Int64) -> GroupCallRecord {
        GroupCallRecord(
          callId: id, creatorId: "alice", title: "Stand-up", room: "room-\(id)", video: true, createdAt: createdAt,
          endedAt: createdAt + 60, endReason: .completed,
          participants: [
            GroupParticipantRecord(
              userId: "alice", outcome: .left, deviceId: "phone", joinedAt: createdAt, durationMs: 60),
            GroupParticipantRecord(userId: "carol", outcome: .declined),
            GroupParticipantRecord(
              userId: "bob", outcome: .left, deviceId: "laptop", joinedAt: createdAt + 1, durationMs: 59),
          ])
      }
      let live = try await rig.liveCalls()
      try live.write([
        .groupEnded(group("g1", at: 100)), .groupEnded(group("g2", at: 100)),
        .groupEnded(group("g3", at: 200), silenced: ["bob"]),
      ])
      // Append-only: a second record under an id is ignored.
      try live.write([.groupEnded(group("g1", at: 999))])
      let store = try await rig.store()
      let all = try await store.groupHistory(of: "alice", limit: 10, before: nil)
      #expect(all == [group("g3", at: 200), group("g2", at: 100), group("g1", at: 100)])
      let page = try await store.groupHistory(
        of: "alice", limit: 10, before: HistoryCursor(createdAt: 100, callId: "g2"))
      #expect(page.map(\.callId) == ["g1"])
      #expect(
        try await store.groupHistory(of: "bob", limit: 10, before: nil, blocked: .hide).map(\.callId) == ["g2", "g1"])
      let shown = try await store.groupHistory(of: "bob", limit: 2, before: nil, blocked: .show)
      #expect(shown.map(\.callId) == ["g3", "g2"] && shown.map(\.blocked) == [true, nil])
    }
  }

  @Suite struct Quality {
    private func report(_ call: CallID, final: Bool, rtt: Double) -> QualityReport {
      QualityReport(callId: call, final: final, rttMs: rtt, localCandidateType: .host, durationMs: 1000)
    }

    @Test(arguments: StoreBackend.allCases) func reportsAreReplacedUntilFinalAndBoundedPerCall(_ backend: StoreBackend)
      async throws
    {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      try StoreContractTests.end(
        [(StoreContractTests.record("c1", at: 1000), false), (StoreContractTests.record("c2", at: 3000), false)],
        in: try await rig.liveCalls())
      let store = try await rig.store()
      func stored(_ user: String, _ device: String, _ role: String, final: Bool, rtt: Double, at: Int64)
        -> StoredQualityReport
      {
        StoredQualityReport(
          userId: user, deviceId: device, role: role, receivedAt: at, report: report("c1", final: final, rtt: rtt))
      }
      let first = stored("bob", "laptop", "callee", final: false, rtt: 10, at: 1)
      #expect(try await store.recordQuality(callId: "c1", first, maxDevicesPerCall: 2) == .stored)
      let replaced = stored("bob", "laptop", "callee", final: true, rtt: 20, at: 2)
      #expect(try await store.recordQuality(callId: "c1", replaced, maxDevicesPerCall: 2) == .stored)
      let late = stored("bob", "laptop", "callee", final: false, rtt: 30, at: 3)
      #expect(try await store.recordQuality(callId: "c1", late, maxDevicesPerCall: 2) == .finalAlreadyStored)
      let caller = stored("alice", "phone", "caller", final: false, rtt: 40, at: 4)
      #expect(try await store.recordQuality(callId: "c1", caller, maxDevicesPerCall: 2) == .stored)
      let third = stored("alice", "tablet", "caller", final: true, rtt: 50, at: 5)
      #expect(try await store.recordQuality(callId: "c1", third, maxDevicesPerCall: 2) == .tooManyDevices)
      // A device already counted may still send its later reports.
      let again = stored("alice", "phone", "caller", final: true, rtt: 60, at: 6)
      #expect(try await store.recordQuality(callId: "c1", again, maxDevicesPerCall: 2) == .stored)

      // By role ("callee" before "caller"), then user and device.
      #expect(try await store.qualityReports(of: "c1") == [replaced, again])
      #expect(try await store.qualityReports(of: "c2").isEmpty)
      let recent = try await store.recentCalls(limit: 5)
      #expect(recent.map(\.0.callId) == ["c2", "c1"])
      #expect(recent.map(\.1) == [[], [replaced, again]])
      #expect(try await store.recentCalls(limit: 1).map(\.0.callId) == ["c2"])
    }
  }

  @Suite struct Blocks {
    @Test(arguments: StoreBackend.allCases) func theLimitHoldsUnderConcurrencyAndBlocksAreKept(_ backend: StoreBackend)
      async throws
    {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let store = try await rig.store()
      let results = await withTaskGroup(of: BlockResult?.self) { group in
        for n in 0..<20 {
          group.addTask { try? await store.block("user\(n)", by: "bob", at: Int64(n % 3), limit: 5) }
        }
        return await group.reduce(into: [BlockResult?]()) { $0.append($1) }
      }
      #expect(results.count { $0 == .added } == 5)
      #expect(results.count { $0 == .limitReached } == 15)
      let blocks = try await store.blocks(of: "bob")
      #expect(blocks.count == 5)
      // Oldest first, then by id.
      #expect(blocks == blocks.sorted { ($0.createdAt, $0.userId) < ($1.createdAt, $1.userId) })
      let kept = try #require(blocks.first)
      #expect(try await store.block(kept.userId, by: "bob", at: 99, limit: 5) == .alreadyBlocked)
      #expect(try await store.block(kept.userId, by: "bob", at: 99, limit: 0) == .alreadyBlocked)
      #expect(try await store.blocks(of: "bob").first == kept)
      #expect(try await store.block("bob", by: "alice", at: 7, limit: 5) == .added)

      #expect(try await store.unblock(kept.userId, by: "bob"))
      #expect(try await !store.unblock(kept.userId, by: "bob"))
      #expect(try await store.blocks(of: "bob").count == 4)
      let all = try await store.allBlocks()
      #expect(all.count == 5 && all.contains { $0.userId == "alice" && $0.blockedId == "bob" })
      #expect(try await store.blocks(of: "carol").isEmpty)
    }
  }

  @Suite struct Directory {
    @Test(arguments: StoreBackend.allCases) func snapshotsDeltasAndVersions(_ backend: StoreBackend) async throws {
      let rig = try StoreRig(backend)
      defer { rig.remove() }
      let store = try await rig.store()
      #expect(try await store.directory(of: "u", since: nil) == DirectoryResponse(version: 0, full: true))

      let upload = try await store.replaceDirectory(of: "u", identify: [1: "a", 2: "b"], block: [9])
      #expect(upload == DirectoryUploadResponse(version: 1, identify: 2, block: 1))
      // Nothing changed: the version stays.
      #expect(try await store.replaceDirectory(of: "u", identify: [2: "b", 1: "a"], block: [9]).version == 1)
      #expect(try await store.replaceDirectory(of: "u", identify: [1: "A", 3: "c"], block: []).version == 2)

      let current = DirectoryResponse(
        version: 2, full: true,
        identify: [DirectoryIdentification(number: 1, label: "A"), DirectoryIdentification(number: 3, label: "c")])
      #expect(try await store.directory(of: "u", since: nil) == current)
      // Ahead of the store: everything.
      #expect(try await store.directory(of: "u", since: 5) == current)
      #expect(
        try await store.directory(of: "u", since: 1)
          == DirectoryResponse(
            version: 2, full: false,
            identify: [DirectoryIdentification(number: 1, label: "A"), DirectoryIdentification(number: 3, label: "c")],
            removedIdentify: [2], removedBlock: [9]))
      // From nothing: added and removed again is no change at all.
      #expect(
        try await store.directory(of: "u", since: 0)
          == DirectoryResponse(
            version: 2, full: false,
            identify: [DirectoryIdentification(number: 1, label: "A"), DirectoryIdentification(number: 3, label: "c")]))
      #expect(try await store.directory(of: "u", since: 2) == DirectoryResponse(version: 2, full: false))
      #expect(try await store.directory(of: "other", since: 0) == DirectoryResponse(version: 0, full: false))

      // Only the last 32 versions' changes are kept: a device further behind gets everything.
      for n in 0..<34 { _ = try await store.replaceDirectory(of: "u", identify: [1: "A"], block: [Int64(100 + n)]) }
      let full = try await store.directory(of: "u", since: 3)
      #expect(full.version == 36 && full.full && full.block == [133])
      let delta = try await store.directory(of: "u", since: 4)
      #expect(!delta.full && delta.block == [133] && delta.removedBlock == [101] && delta.removedIdentify.isEmpty)
      let reopened = try await rig.store()
      #expect(try await reopened.directory(of: "u", since: 4) == delta)
    }
  }
}

extension StoredDevice {
  fileprivate func with(tokens: [PushToken], deviceId: String, at updatedAt: Int64) -> StoredDevice {
    StoredDevice(
      userId: userId, installationId: installationId, deviceId: deviceId, platform: platform, tokens: tokens,
      updatedAt: updatedAt)
  }
}

extension StoreContractTests {
  /// A cursor comes back from a query string, where `%00` decodes to NUL, which PostgreSQL's
  /// text cannot hold: such a cursor is no cursor (400), on either store.
  @Test func aCursorHoldingNulIsNoCursor() {
    #expect(HistoryCursor(token: "1700000000000_call\u{0}x") == nil)
    #expect(
      HistoryCursor(token: "1700000000000_call-x") == HistoryCursor(createdAt: 1_700_000_000_000, callId: "call-x"))
  }
}
