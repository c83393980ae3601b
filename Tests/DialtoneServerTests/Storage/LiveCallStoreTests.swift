import DialtoneCalls
import DialtoneProtocol
import DialtoneSQLite
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneCalls
@testable import DialtoneServer
@testable import DialtoneStorage

/// The journal's SQLite side: what it writes is what a restarted server reads back, history is
/// append-only, and the call-id check sees every kind of call.
struct LiveCallStoreTests {
  private func temporaryDirectory() -> String { NSTemporaryDirectory() + "dialtone-live-\(UUID().uuidString)" }

  private func snapshot(_ callId: CallID, phase: LiveCallSnapshot.Phase = .ringing) -> LiveCallSnapshot {
    LiveCallSnapshot(
      callId: callId, caller: Identity(userId: "alice", deviceId: "phone", name: "Alice"), calleeId: "bob",
      video: true, createdAt: 1000, phase: phase, answeredBy: phase == .accepted ? "laptop" : nil,
      answeredAt: phase == .accepted ? 2000 : nil, ringDeadline: 46_000, callerGraceDeadline: 5000,
      answererGraceDeadline: nil,
      invite: .invite(
        .init(
          callId: callId, from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: true,
          offer: SessionDescription(sdp: "v=0\r\noffer\r\n"), createdAt: 1000)),
      accept: phase == .accepted
        ? .accept(.init(callId: callId, from: Peer(userId: "bob", deviceId: "laptop"), answer: .init(sdp: "v=0 a")))
        : nil)
  }

  private func record(_ callId: CallID, reason: EndReason, duration: Int64?) -> CallRecord {
    CallRecord(
      callId: callId, callerId: "alice", calleeId: "bob", answeredBy: duration == nil ? nil : "laptop", video: true,
      createdAt: 1000, answeredAt: duration == nil ? nil : 2000, endedAt: 9000, endReason: reason,
      durationMs: duration)
  }

  /// A caller's candidate, as held for late callee devices while the call rings.
  private let signal = ServerMessage.candidate(
    .init(
      callId: "c1", from: Peer(userId: "alice", deviceId: "phone"),
      candidate: IceCandidate(candidate: "candidate:1 1 udp 1 10.0.0.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0))
  )

  @Test func whatIsWrittenIsWhatARestartedServerReads() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    do {
      let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
      try store.write([.put(snapshot("c1")), .signal("c1", signal), .put(snapshot("c2")), .signal("c2", signal)])
      try store.write([.put(snapshot("c2", phase: .accepted)), .put(snapshot("c3"))])
      try store.write([.ended(record("c3", reason: .cancelled, duration: nil), callerDevice: "phone")])
    }
    let reopened = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let live = try reopened.liveCalls()
    #expect(live.map(\.snapshot.callId) == ["c1", "c2"])
    #expect(live.first == StoredLiveCall(snapshot: snapshot("c1"), callerSignals: [signal]))
    // Accepted: no caller signals are held any more.
    #expect(live.last == StoredLiveCall(snapshot: snapshot("c2", phase: .accepted), callerSignals: []))
    #expect(
      try reopened.callsEnded(since: 9000)
        == [RecentlyEndedCall(record: record("c3", reason: .cancelled, duration: nil), callerDevice: "phone")])
    #expect(try reopened.callsEnded(since: 9001).isEmpty)
  }

  /// What is stored is always the snapshot's own invite and accept, at every put: one that its
  /// row can make again is stored as the row's columns, one that differs from its row in any
  /// field as JSON, and either reads back whole, whichever the put before it was.
  @Test func aCallsInviteIsStoredAsItIsAtEveryPut() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    func stored() throws -> [SQLiteValue] { try file.query("SELECT invite, accept FROM live_calls").first ?? [] }
    var other = snapshot("c1", phase: .accepted)
    other.invite = .invite(
      .init(
        callId: "c1", from: Peer(userId: "alice", deviceId: "phone", name: "Alice"), video: true,
        offer: SessionDescription(sdp: "v=0\r\nanother \"offer\"\r\n"), createdAt: 999))
    other.accept = .accept(
      .init(callId: "c1", from: Peer(userId: "carol", deviceId: "laptop"), answer: .init(sdp: "a")))
    for (call, rebuilt) in [
      (snapshot("c1"), true), (other, false), (snapshot("c1", phase: .accepted), true), (other, false),
    ] {
      try store.write([.put(call)])
      let row = try stored()
      #expect(row.first.map { $0 == .text(StoredCallMessages.rebuilt) } == rebuilt)
      #expect(row.last.map { $0 == .text(StoredCallMessages.rebuilt) } == (call.accept == nil ? false : rebuilt))
      #expect(try store.liveCalls().map(\.snapshot) == [call])
    }
    try store.write([.ended(record("c1", reason: .hangup, duration: 5), callerDevice: "phone")])
    #expect(try store.liveCalls().isEmpty)
  }

  /// The invite and the accept as `CallRouter` makes them are stored as their row (no JSON) and
  /// read back field for field: the caller's name or none, `preconnect`, video, the creation
  /// time, the answering device and its name, `preconnected`, with or without an answer.
  @Test func theRoutersInviteAndAcceptAreMadeAgainFromTheirRow() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var calls: [LiveCallSnapshot] = []
    for (index, (name, preconnect, answerer, onLeg)) in [
      (nil, false, nil, false), ("Alice", true, "Bob", true), ("Älice \"A\"", false, "", false), ("", true, nil, true),
    ].enumerated() {
      for answered in [false, true] {
        var call = CallRouter.Call(
          id: "c\(index)-\(answered)", caller: Identity(userId: "alice", deviceId: "phone-\(index)", name: name),
          calleeId: "bob", video: index % 2 == 0, createdAt: Date(milliseconds: 1000 + Int64(index)),
          ringDeadline: Date(milliseconds: 46_000),
          invitation: .init(offer: .init(sdp: "v=0\r\no\r\n"), preconnect: preconnect))
        if answered {
          call.invitation.offer = nil
          call.phase = .accepted(
            .init(
              device: Peer(userId: "bob", deviceId: "laptop-\(index)", name: answerer), at: Date(milliseconds: 2000),
              answer: onLeg ? nil : .init(sdp: "v=0\r\na\r\n"), onLeg: onLeg))
        }
        calls.append(call.snapshot)
      }
    }
    do {
      let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
      try store.write(calls.map { .put($0) })
    }
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    for row in try file.query("SELECT invite, accept, phase FROM live_calls") {
      #expect(row[0] == .text(StoredCallMessages.rebuilt))
      #expect(row[1] == (row[2] == .text("accepted") ? .text(StoredCallMessages.rebuilt) : .null))
    }
    let read = try SQLiteLiveCallStore.open(dataDirectory: directory).liveCalls().map(\.snapshot)
    let byId = Dictionary(uniqueKeysWithValues: read.map { ($0.callId, $0) })
    for call in calls {
      // `Identity`'s `==` leaves the name out: compared on its own.
      #expect(byId[call.callId] == call)
      #expect(byId[call.callId]?.caller.name == call.caller.name)
    }
  }

  /// An invite's offer and an accept's answer are stored as they are, beside their messages'
  /// JSON, and read back into them; an SDP with a NUL byte (which a text value would cut) stays
  /// inside the JSON.
  @Test func theOfferAndTheAnswerAreStoredOutsideTheirMessages() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var withNUL = snapshot("c3", phase: .accepted)
    withNUL.invite = .invite(
      .init(
        callId: "c3", from: Peer(userId: "alice", deviceId: "phone"), video: false,
        offer: SessionDescription(sdp: "v=0\r\n\u{0}after\r\n"), createdAt: 1000))
    do {
      let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
      try store.write([.put(snapshot("c1")), .put(snapshot("c2", phase: .accepted)), .put(withNUL)])
    }
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    let rows = try file.query("SELECT call_id, invite, offer_sdp, accept, answer_sdp FROM live_calls ORDER BY call_id")
    #expect(rows.map { $0[2] } == [.text("v=0\r\noffer\r\n"), .text("v=0\r\noffer\r\n"), .null])
    #expect(rows.map { $0[4] } == [.null, .text("v=0 a"), .text("v=0 a")])
    #expect(rows.prefix(2).allSatisfy { $0[1].string?.contains("sdp") == false })
    #expect(rows.allSatisfy { $0[3].string?.contains("sdp") != true })
    #expect(rows.last?[1].string?.contains("\\u0000after") == true)
    let reopened = try SQLiteLiveCallStore.open(dataDirectory: directory)
    #expect(try reopened.liveCalls().map(\.snapshot) == [snapshot("c1"), snapshot("c2", phase: .accepted), withNUL])
  }

  /// A live call written before the offer and the answer had columns of their own (both inside
  /// the JSON, schema 10), or before its invite and accept were made again from the row (their
  /// JSON without the SDP, the SDP in its columns, schema 11), reads back whole once the store
  /// opens the file.
  @Test(arguments: [10, 11]) func aLiveCallWrittenWithItsMessagesAsJSONReadsBackWhole(schema: Int) throws {
    let directory = temporaryDirectory()
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = (directory as NSString).appendingPathComponent("dialtone.sqlite")
    let call = snapshot("c1", phase: .accepted)
    let sdpColumns = schema >= 11
    let invite = sdpColumns ? StoredSessionDescription.split(call.invite) : (message: call.invite, sdp: nil)
    let accept = call.accept.map { sdpColumns ? StoredSessionDescription.split($0) : (message: $0, sdp: nil) }
    let (columns, values) = sdpColumns ? (", offer_sdp, answer_sdp", ", ?, ?") : ("", "")
    do {
      let old = try oldDatabase(at: path, schema: schema)
      try old.query(
        """
        INSERT INTO live_calls (call_id, caller_id, caller_device, caller_name, callee_id, video, created_at, phase,
          answered_by, answered_at, ring_deadline, caller_grace_deadline, invite, accept\(columns))
        VALUES ('c1', 'alice', 'phone', 'Alice', 'bob', 1, 1000, 'accepted', 'laptop', 2000, 46000, 5000, ?, ?\(values))
        """,
        [
          .text(MessageCodec.encodeString(invite.message, seq: nil)),
          SQLiteValue(accept.map { MessageCodec.encodeString($0.message, seq: nil) }),
        ] + (sdpColumns ? [SQLiteValue(invite.sdp), SQLiteValue(accept?.sdp)] : []))
    }
    let store = try SQLiteLiveCallStore(path: path)
    #expect(try store.liveCalls().map(\.snapshot) == [call])
  }

  /// Caller signals go at the accept and at the end of a call that stored some, the writer's
  /// memory of which calls did so taken from the file at open and kept across a write that failed
  /// (whose deletes were rolled back): no signal is left behind for a call that is not ringing.
  @Test func signalsGoWithTheirCallAcrossARestartAndAFailedWrite() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    do {
      let first = try SQLiteLiveCallStore.open(dataDirectory: directory)
      try first.write(["c1", "c2"].flatMap { [.put(snapshot($0)), .signal($0, signal)] } + [.put(snapshot("c3"))])
      #expect(first.callsWithSignalsCount == 2)
    }
    let file = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("dialtone.sqlite"))
    func storedSignals() throws -> Int64 {
      try file.query("SELECT count(*) FROM live_call_signals").first?.first?.int ?? -1
    }
    // Restarted: the calls with signals are known from the file.
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    #expect(store.callsWithSignalsCount == 2)
    try store.write([.put(snapshot("c1", phase: .accepted))])
    #expect(try storedSignals() == 1)
    #expect(store.callsWithSignalsCount == 1)
    // A write that fails after c2's signals were deleted in it: they are back, and still known.
    try file.execute("CREATE TRIGGER refuse_record BEFORE INSERT ON calls BEGIN SELECT RAISE(ABORT, 'refused'); END")
    #expect(throws: SQLiteError.self) {
      try store.write([.ended(record("c2", reason: .cancelled, duration: nil), callerDevice: "phone")])
    }
    #expect(try storedSignals() == 1)
    #expect(store.callsWithSignalsCount == 1)
    try file.execute("DROP TRIGGER refuse_record")
    try store.write([
      .ended(record("c2", reason: .cancelled, duration: nil), callerDevice: "phone"),
      .ended(record("c3", reason: .cancelled, duration: nil), callerDevice: "phone"),
    ])
    #expect(try storedSignals() == 0)
    #expect(store.callsWithSignalsCount == 0)
    #expect(try store.liveCalls().map(\.snapshot) == [snapshot("c1", phase: .accepted)])
  }

  @Test func aRecordIsNeverOverwrittenByAnotherCallWithItsId() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    try store.write([.ended(record("c1", reason: .hangup, duration: 7000), callerDevice: "phone")])
    try store.write([.ended(record("c1", reason: .declined, duration: nil), callerDevice: "phone")])
    let history = try SQLiteStore.open(dataDirectory: directory)
    #expect(
      try await history.history(of: "alice", limit: 10, before: nil) == [record("c1", reason: .hangup, duration: 7000)])
  }

  @Test func everyKindOfCallIdCountsAsUsed() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    try store.write([
      .put(snapshot("live")), .ended(record("ended", reason: .hangup, duration: 1), callerDevice: "phone"),
    ])
    try store.write([
      .groupEnded(
        GroupCallRecord(
          callId: "group", creatorId: "alice", video: false, createdAt: 1, endedAt: 2, endReason: .ended,
          participants: []))
    ])
    for id in ["live", "ended", "group"] { #expect(try await store.isCallIdUsed(id), "\(id)") }
    #expect(try await !store.isCallIdUsed("fresh"))
    // Answered on the store's own thread (what the hub asks) and through the default, a task
    // awaiting the store's answer (a store with only that, as the wrapper below): the same.
    let wrapped = try RestartingLiveCallStore(dataDirectory: directory, failures: 0)
    for id in ["live", "ended", "group", "fresh"] {
      #expect(try await answered(store, id) == (id != "fresh"), "\(id)")
      #expect(try await answered(wrapped, id) == (id != "fresh"), "\(id)")
    }
  }

  @Test func theFilterOfUsedIdsHoldsEveryKindOfCallIdPastAPage() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    #expect(try store.usedCallIds()?.mayContain("fresh") == false)
    let group = GroupCallRecord(
      callId: "group", creatorId: "alice", video: false, createdAt: 1, endedAt: 2, endReason: .ended, participants: [])
    var groupLive = group
    groupLive.callId = "group-live"
    // More ended calls than one page of the read (4,096), the empty id among them.
    let ended = ([""] + (0..<5000).map { "ended-\($0)" }).map {
      LiveCallChange.ended(record($0, reason: .hangup, duration: 1), callerDevice: "phone")
    }
    try store.write([.put(snapshot("live")), .groupEnded(group, silenced: []), .groupLive(groupLive)] + ended)
    let filter = try #require(try store.usedCallIds())
    let ids = ["live", "group", "group-live", "", "ended-0", "ended-4095", "ended-4096", "ended-4999"]
    for id in ids { #expect(filter.mayContain(id), "\(id)") }
    #expect(filter.count == 5004)
  }

  @Test func aHistoryPastTheFiltersBoundGetsNoFilterAndIsNotRead() throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    try store.write(
      [.put(snapshot("live"))]
        + ["a", "b"].map { .ended(record($0, reason: .hangup, duration: 1), callerDevice: "phone") })
    #expect(try store.usedCallIds(maxIds: 2) == nil)
    #expect(try store.usedCallIds(maxIds: 3)?.count == 3)
  }

  /// The look-up of `isCallIdUsed(_:answer:)`, awaited.
  private func answered(_ store: any LiveCallStore, _ callId: CallID) async throws -> Bool {
    try await withCheckedThrowingContinuation { continuation in
      store.isCallIdUsed(callId) { continuation.resume(with: $0) }
    }
  }

  @Test func aGroupCallLeftLiveIsRecordedOnceAndAnEndedOneKeepsItsOwnRecord() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    func group(_ id: CallID, _ reason: GroupEndReason) -> GroupCallRecord {
      GroupCallRecord(
        callId: id, creatorId: "alice", video: false, createdAt: 1, endedAt: 5, endReason: reason,
        participants: [
          GroupParticipantRecord(userId: "alice", outcome: .left, deviceId: "phone", joinedAt: 1, durationMs: 4)
        ])
    }
    let store = try SQLiteLiveCallStore.open(dataDirectory: directory)
    try store.write([.groupLive(group("g1", .serverRestart)), .groupLive(group("g2", .serverRestart))])
    try store.write([.groupEnded(group("g2", .completed))])
    #expect(try store.completeInterruptedGroupCalls() == 1)
    #expect(try store.completeInterruptedGroupCalls() == 0)
    let history = try SQLiteStore.open(dataDirectory: directory)
    let records = try await history.groupHistory(of: "alice", limit: 10, before: nil)
    #expect(Set(records.map { "\($0.callId) \($0.endReason.rawValue)" }) == ["g1 server-restart", "g2 completed"])
  }

  /// A data directory of the previous release (schema 4: history without live calls) keeps its
  /// records, and their ids stay taken, once the server that journals live calls opens it.
  @Test func aVersion4HistoryIsKeptAndItsIdsStayTaken() async throws {
    let directory = temporaryDirectory()
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = (directory as NSString).appendingPathComponent("dialtone.sqlite")
    do {
      let old = try oldDatabase(at: path, schema: 4)
      try old.execute(
        "INSERT INTO calls VALUES ('old-1', 'alice', 'bob', 'laptop', 0, 1000, 2000, 9000, 'hangup', 7000)")
    }
    let store = try SQLiteLiveCallStore(path: path)
    #expect(try await store.isCallIdUsed("old-1"))
    // A record without the caller's device (written before it was kept) is not reloaded as a
    // recent end: nobody could be told whose device it was.
    #expect(try store.callsEnded(since: 0).isEmpty)
    let history = try SQLiteStore(path: path)
    #expect(try await history.schemaVersion() == Int64(SQLiteStore.migrations.count))
    #expect(
      try await history.history(of: "bob", limit: 10, before: nil)
        == [record("old-1", reason: .hangup, duration: 7000).with(video: false)])
  }

  @Test func theJournalReportsEachBatchOnceItIsWritten() async throws {
    let rig = try JournalRig()
    defer { rig.remove() }
    let (store, journal, reported) = (rig.store, rig.journal, rig.reported)
    var last: UInt64 = 0
    for n in 0..<50 { last = journal.submit([.put(snapshot("c\(n)"))]) }
    journal.close()
    #expect(last == 50)
    #expect(try store.liveCalls().count == 50)
    for _ in 0..<1000 where reported.current < last { try await Task.sleep(for: .milliseconds(2)) }
    #expect(reported.current == last)
  }
}

/// A live-call store whose first writes fail, as a database does while it restarts.
private final class RestartingLiveCallStore: LiveCallStore, @unchecked Sendable {
  // @unchecked: `failuresLeft` and `attempts` are touched only under `lock`.
  private let inner: SQLiteLiveCallStore
  private let lock = NSLock()
  private var failuresLeft: Int
  private(set) var attempts = 0

  init(dataDirectory: String, failures: Int) throws {
    inner = try SQLiteLiveCallStore.open(dataDirectory: dataDirectory)
    failuresLeft = failures
  }

  func write(_ changes: [LiveCallChange]) throws {
    let fail = lock.withLock {
      attempts += 1
      failuresLeft -= 1
      return failuresLeft >= 0
    }
    if fail { throw PostgresLikeError() }
    try inner.write(changes)
  }
  func liveCalls() throws -> [StoredLiveCall] { try inner.liveCalls() }
  func completeInterruptedGroupCalls() throws -> Int { try inner.completeInterruptedGroupCalls() }
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall] { try inner.callsEnded(since: since) }
  func isCallIdUsed(_ callId: CallID) async throws -> Bool { try await inner.isCallIdUsed(callId) }

  struct PostgresLikeError: Error {}
}

extension LiveCallStoreTests {
  @Test func aBatchTheStoreRefusesIsRetriedAndReportedOnlyOnceWritten() async throws {
    let directory = temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let store = try RestartingLiveCallStore(dataDirectory: directory, failures: 3)
    let journal = CallJournal(store: store, log: Log(level: .error, subsystem: "test"))
    let reported = Locked<UInt64>(0)
    journal.start { ticket in reported.withLock { $0 = max($0, ticket) } }
    let ticket = journal.submit([.put(snapshot("c1"))])
    journal.close()
    #expect(store.attempts == 4)
    #expect(reported.current == ticket)
    #expect(try store.liveCalls().map(\.snapshot.callId) == ["c1"])
  }
}

extension CallRecord {
  fileprivate func with(video: Bool) -> CallRecord {
    var copy = self
    copy.video = video
    return copy
  }
}
