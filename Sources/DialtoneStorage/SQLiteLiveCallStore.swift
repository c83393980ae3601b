import DialtoneCalls
import DialtoneProtocol
import DialtoneSQLite
import DialtoneSupport
import Foundation

/// `LiveCallStore` on the server's SQLite file, next to the history it completes. Three
/// connections: the journal's writes never wait for the hub's reads (WAL lets one writer and
/// readers work at once) nor for the checkpoints, and none waits for `SQLiteStore`'s queries.
package final class SQLiteLiveCallStore: LiveCallStore, @unchecked Sendable {
  // @unchecked: each connection is used only under its own lock (`writerLock`, `readerLock`), and
  // `callsWithSignals` and `signalsUntracked` only under `writerLock`.
  private let writer: SQLiteDatabase
  private let writerLock = Locked()
  private let reader: SQLiteDatabase
  private let readerLock = Locked()
  /// Where call-id lookups wait for the reader, so that no caller's thread does.
  private let lookups = DispatchQueue(label: "dialtone.call-id-lookups")

  /// The calls that may have caller signals stored (under `writerLock`): read from the file when
  /// the store opens, added to when a signal is written, taken away once a commit deleted them.
  /// An accept or an end of any other call runs no `DELETE` on `live_call_signals` (most calls
  /// store no signal: the callee answers before the caller's candidates come). Past
  /// `maxCallsWithSignals`, every accept and end deletes again (`signalsUntracked`).
  private var callsWithSignals: Set<CallID> = []
  private var signalsUntracked = false
  package static let maxCallsWithSignals = 65_536

  /// Copies the journal's WAL into the database file off the journal's thread.
  private let checkpointer: WALCheckpointer

  /// WAL frames the journal's commits let gather before `checkpointer` copies them into the
  /// database file (SQLite's automatic checkpoint runs every 1,000, inside the commit that passes
  /// them). A checkpoint copies each page once however often it is in the WAL, and the live
  /// calls' and the history's hot pages are written again and again: a quarter as many
  /// checkpoints copy little more each, with a quarter of the `fdatasync`s. The WAL file grows to
  /// about 16 MB instead of 4. What a commit makes durable does not change: it is in the WAL,
  /// with `synchronous=NORMAL` as before, when it returns.
  package static let framesPerCheckpoint = 4000

  package init(path: String) throws {
    writer = try SQLiteDatabase(path: path)
    try SQLiteStore.migrate(writer)
    reader = try SQLiteDatabase(path: path)
    let checkpointer = WALCheckpointer(try SQLiteDatabase(path: path))
    self.checkpointer = checkpointer
    // The journal's commits no longer stop for a checkpoint (a copy and two `fdatasync`s, up to
    // ~15 ms here, while every outcome waits on the commit): they ask for one once the WAL is
    // long enough, and it runs on its own connection while the journal goes on writing.
    writer.onWALCommit { frames in
      if frames >= Self.framesPerCheckpoint { checkpointer.request() }
    }
    let stored = try writer.query("SELECT DISTINCT call_id FROM live_call_signals").compactMap { $0.first?.string }
    if stored.count >= Self.maxCallsWithSignals { signalsUntracked = true } else { callsWithSignals = Set(stored) }
  }

  /// How many checkpoints ran (tests).
  package var checkpoints: Int { checkpointer.completed }

  package static func open(dataDirectory: String) throws -> SQLiteLiveCallStore {
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    return try SQLiteLiveCallStore(path: (dataDirectory as NSString).appendingPathComponent("dialtone.sqlite"))
  }

  package func write(_ changes: [LiveCallChange]) throws {
    try writerLock.withLock {
      // Calls whose signals this transaction deletes: known gone once it commits.
      var signalsDeleted: [CallID] = []
      try writer.transaction {
        for change in changes {
          switch change {
          case .put(let call):
            try put(call)
            if call.phase == .accepted { try deleteSignals(of: call.callId, into: &signalsDeleted) }
          case .signal(let callId, let message):
            try writer.query(
              constant: "INSERT INTO live_call_signals (call_id, message) VALUES (?, ?)",
              [.text(callId), .text(MessageCodec.encodeString(message, seq: nil))])
            if callsWithSignals.count >= Self.maxCallsWithSignals { signalsUntracked = true }
            if !signalsUntracked { callsWithSignals.insert(callId) }
          case .ended(let record, let callerDevice, let blocked):
            try end(record, callerDevice: callerDevice, blocked: blocked, signalsDeleted: &signalsDeleted)
          case .groupLive(let record, let silenced, _):
            try writer.query(
              constant: "INSERT OR REPLACE INTO live_group_calls (call_id, record, silenced) VALUES (?, ?, ?)",
              [
                .text(record.callId), .text(String(decoding: MessageCodec.encode(record), as: UTF8.self)),
                .text(silenced.sorted().joined(separator: "\n")),
              ])
          case .groupEnded(let record, let silenced):
            try writer.query(constant: "DELETE FROM live_group_calls WHERE call_id = ?", [.text(record.callId)])
            try SQLiteStore.insertGroupCall(record, silenced: silenced, into: writer)
          }
        }
      }
      for callId in signalsDeleted { callsWithSignals.remove(callId) }
    }
  }

  /// The call's caller signals go (it was accepted or it ended), when it may have any.
  private func deleteSignals(of callId: CallID, into deleted: inout [CallID]) throws {
    guard signalsUntracked || callsWithSignals.contains(callId) else { return }
    try writer.query(constant: "DELETE FROM live_call_signals WHERE call_id = ?", [.text(callId)])
    deleted.append(callId)
  }

  /// A call's row is written in place once it exists (an upsert keeps its rowid and its key's
  /// index entry): `INSERT OR REPLACE` deleted the row and inserted it again under a new rowid,
  /// which rewrote the key's index page and a second table page at every accept. The invite and
  /// the accept go in as their SDP (`StoredSessionDescription`) and, when the row can make them
  /// again, the few values it lacks (`StoredCallMessages`); as JSON when it cannot.
  private func put(_ call: LiveCallSnapshot) throws {
    let invite = StoredSessionDescription.split(call.invite)
    let accept = call.accept.map(StoredSessionDescription.split)
    let storedInvite = StoredCallMessages.stored(invite: invite.message, in: call)
    let storedAccept = accept.map { StoredCallMessages.stored(accept: $0.message, in: call) }
    try writer.query(
      constant: """
        INSERT INTO live_calls (call_id, caller_id, caller_device, caller_name, callee_id, video, created_at,
          phase, answered_by, answered_at, ring_deadline, caller_grace_deadline, answerer_grace_deadline, invite, accept,
          blocked, offer_sdp, answer_sdp, invite_preconnect, answerer_name, accept_preconnected)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (call_id) DO UPDATE SET caller_id = excluded.caller_id, caller_device = excluded.caller_device,
          caller_name = excluded.caller_name, callee_id = excluded.callee_id, video = excluded.video,
          created_at = excluded.created_at, phase = excluded.phase, answered_by = excluded.answered_by,
          answered_at = excluded.answered_at, ring_deadline = excluded.ring_deadline,
          caller_grace_deadline = excluded.caller_grace_deadline, answerer_grace_deadline = excluded.answerer_grace_deadline,
          invite = excluded.invite, accept = excluded.accept, blocked = excluded.blocked,
          offer_sdp = excluded.offer_sdp, answer_sdp = excluded.answer_sdp, invite_preconnect = excluded.invite_preconnect,
          answerer_name = excluded.answerer_name, accept_preconnected = excluded.accept_preconnected
        """,
      [
        .text(call.callId), .text(call.caller.userId), .text(call.caller.deviceId), SQLiteValue(call.caller.name),
        .text(call.calleeId), .integer(call.video ? 1 : 0), .integer(call.createdAt), .text(call.phase.rawValue),
        SQLiteValue(call.answeredBy), SQLiteValue(call.answeredAt), .integer(call.ringDeadline),
        SQLiteValue(call.callerGraceDeadline), SQLiteValue(call.answererGraceDeadline),
        .text(storedInvite.text), SQLiteValue(storedAccept?.text), .integer(call.blocked ? 1 : 0),
        SQLiteValue(invite.sdp), SQLiteValue(accept?.sdp), SQLiteValue(storedInvite.preconnect.map { $0 ? 1 : 0 }),
        SQLiteValue(storedAccept?.answerer?.name), SQLiteValue(storedAccept?.answerer.map { $0.preconnected ? 1 : 0 }),
      ])
  }

  /// The live state goes and the record is added; a record already under this id is kept as it
  /// is (ids are checked before a call starts, so this would be a bug, not a retry).
  private func end(
    _ record: CallRecord, callerDevice: String, blocked: Bool, signalsDeleted: inout [CallID]
  ) throws {
    try deleteSignals(of: record.callId, into: &signalsDeleted)
    try writer.query(constant: "DELETE FROM live_calls WHERE call_id = ?", [.text(record.callId)])
    try SQLiteStore.insert(record, into: writer, callerDevice: callerDevice, blocked: blocked)
  }

  /// How many calls may have caller signals stored, as the writer counts them (tests).
  package var callsWithSignalsCount: Int { writerLock.withLock { callsWithSignals.count } }

  package func callsEnded(since: Int64) throws -> [RecentlyEndedCall] {
    try writerLock.withLock {
      // Newest rowids first, until a page holds nothing as recent: records are added as calls
      // end, so this reads the recent ends and no more of a long history.
      var ended: [RecentlyEndedCall] = []
      var before = Int64.max
      while true {
        let rows = try writer.query(
          "SELECT \(SQLiteStore.callColumns), caller_device, rowid, blocked FROM calls WHERE rowid < ? ORDER BY rowid DESC LIMIT 256",
          [.integer(before)])
        var recent = false
        for row in rows {
          guard row.count == 13, let rowid = row[11].int else { continue }
          before = rowid
          guard let record = SQLiteStore.record(Array(row.prefix(10))), (record.endedAt ?? 0) >= since else {
            continue
          }
          recent = true
          if let device = row[10].string {
            ended.append(RecentlyEndedCall(record: record, callerDevice: device, blocked: row[12].int == 1))
          }
        }
        if rows.count < 256 || !recent { break }
      }
      return ended.reversed()
    }
  }

  package func liveCalls() throws -> [StoredLiveCall] {
    try writerLock.withLock {
      var signals: [CallID: [ServerMessage]] = [:]
      for row in try writer.query("SELECT call_id, message FROM live_call_signals ORDER BY rowid") {
        guard row.count == 2, let callId = row[0].string, let text = row[1].string,
          let message = try? MessageCodec.decodeServerMessage(text).message
        else { continue }
        signals[callId, default: []].append(message)
      }
      return try writer.query(
        """
        SELECT call_id, caller_id, caller_device, caller_name, callee_id, video, created_at, phase, answered_by,
          answered_at, ring_deadline, caller_grace_deadline, answerer_grace_deadline, invite, accept, blocked,
          offer_sdp, answer_sdp, invite_preconnect, answerer_name, accept_preconnected
        FROM live_calls ORDER BY created_at, call_id
        """
      ).compactMap { row -> StoredLiveCall? in
        guard row.count == 21, let callId = row[0].string, let callerId = row[1].string,
          let callerDevice = row[2].string, let calleeId = row[4].string, let createdAt = row[6].int,
          let phase = row[7].string.flatMap(LiveCallSnapshot.Phase.init(rawValue:)), let ringDeadline = row[10].int,
          let inviteText = row[13].string
        else { return nil }
        let caller = Identity(userId: callerId, deviceId: callerDevice, name: row[3].string)
        let video = row[5].int == 1
        guard
          let invite = StoredCallMessages.invite(
            text: inviteText, preconnect: row[18].int.map { $0 == 1 }, callId: callId, caller: caller, video: video,
            createdAt: createdAt)
        else { return nil }
        let accept = StoredCallMessages.accept(
          text: row[14].string, callId: callId, calleeId: calleeId, device: row[8].string, name: row[19].string,
          preconnected: row[20].int.map { $0 == 1 })
        let snapshot = LiveCallSnapshot(
          callId: callId, caller: caller, calleeId: calleeId, video: video, createdAt: createdAt, phase: phase,
          answeredBy: row[8].string, answeredAt: row[9].int, ringDeadline: ringDeadline,
          callerGraceDeadline: row[11].int, answererGraceDeadline: row[12].int,
          invite: StoredSessionDescription.joined(invite, sdp: row[16].string),
          accept: accept.map { StoredSessionDescription.joined($0, sdp: row[17].string) }, blocked: row[15].int == 1)
        return StoredLiveCall(snapshot: snapshot, callerSignals: phase == .ringing ? signals[callId] ?? [] : [])
      }
    }
  }

  package func completeInterruptedGroupCalls() throws -> Int {
    try writerLock.withLock {
      try writer.transaction {
        let rows = try writer.query("SELECT call_id, record, silenced FROM live_group_calls")
        for row in rows {
          guard row.count == 3, let text = row[1].string,
            let record = try? MessageCodec.decode(GroupCallRecord.self, from: Array(text.utf8), options: .lenient)
          else { continue }
          let silenced = Set((row[2].string ?? "").split(separator: "\n").map(String.init))
          try SQLiteStore.insertGroupCall(record, silenced: silenced, into: writer)
        }
        try writer.query("DELETE FROM live_group_calls")
        return rows.count
      }
    }
  }

  package func isCallIdUsed(_ callId: CallID) async throws -> Bool {
    try await withCheckedThrowingContinuation { continuation in
      lookups.async { continuation.resume(with: Result { try self.isCallIdUsedNow(callId) }) }
    }
  }

  package func isCallIdUsed(_ callId: CallID, answer: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
    lookups.async { answer(Result { try self.isCallIdUsedNow(callId) }) }
  }

  /// The four tables' ids, read in pages of the keys' order on the reader; sized for twice as
  /// many ids as there are (at least `UsedCallIdFilter`'s minimum) before it first grows.
  package func usedCallIds() throws -> UsedCallIdFilter? { try usedCallIds(maxIds: UsedCallIdFilter.defaultMaxIds) }

  /// `usedCallIds()` with the filter's bound: a history already past it gets no filter (every id
  /// asked about, as a full filter would), without reading its ids first.
  package func usedCallIds(maxIds: Int) throws -> UsedCallIdFilter? {
    try readerLock.withLock {
      let tables = ["calls", "live_calls", "group_calls", "live_group_calls"]
      var held = 0
      for table in tables {
        held += try reader.query("SELECT count(*) FROM \(table)").first?.first?.int.map(Int.init) ?? 0
      }
      guard held <= maxIds else { return nil }
      var filter = UsedCallIdFilter(expected: min(2 * held, maxIds), maxIds: maxIds)
      for table in tables {
        // `>=` from the empty id on the first page, so that no id is skipped, `>` after.
        var after = ""
        var from = ">="
        while true {
          let rows = try reader.query(
            "SELECT call_id FROM \(table) WHERE call_id \(from) ? ORDER BY call_id LIMIT 4096", [.text(after)])
          for row in rows {
            guard let callId = row.first?.string else { continue }
            filter.insert(callId)
            after = callId
          }
          if rows.count < 4096 { break }
          from = ">"
        }
      }
      return filter
    }
  }

  private func isCallIdUsedNow(_ callId: CallID) throws -> Bool {
    try readerLock.withLock {
      let id: [SQLiteValue] = [.text(callId)]
      return try !reader.query(
        """
        SELECT 1 WHERE EXISTS (SELECT 1 FROM calls WHERE call_id = ?) OR EXISTS (SELECT 1 FROM live_calls WHERE call_id = ?)
          OR EXISTS (SELECT 1 FROM group_calls WHERE call_id = ?) OR EXISTS (SELECT 1 FROM live_group_calls WHERE call_id = ?)
        """, id + id + id + id
      ).isEmpty
    }
  }
}

/// Checkpoints one database on a queue of its own, with a connection of its own, one at a time:
/// asked again while one is queued, it runs once.
private final class WALCheckpointer: @unchecked Sendable {
  // @unchecked: `connection` is used only on `queue`; `state` is behind its lock.
  private let connection: SQLiteDatabase
  private let queue = DispatchQueue(label: "dialtone.wal-checkpoints")
  private let state = Locked<(queued: Bool, completed: Int)>((false, 0))

  init(_ connection: SQLiteDatabase) { self.connection = connection }

  var completed: Int { state.withLock { $0.completed } }

  func request() {
    let queued = state.withLock { state in
      defer { state.queued = true }
      return state.queued
    }
    guard !queued else { return }
    queue.async { [self] in
      // Asked again from now on: commits made while this one copies are copied by the next.
      state.withLock { $0.queued = false }
      // A checkpoint that fails (the disk full) leaves the WAL as it is: the next commit past
      // the mark asks again, and SQLite's own checkpoint on another connection still runs.
      _ = try? connection.checkpoint()
      state.withLock { $0.completed += 1 }
    }
  }
}
