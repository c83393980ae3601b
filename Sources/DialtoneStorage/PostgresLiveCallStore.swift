import DialtoneCalls
import DialtonePostgres
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// `LiveCallStore` on the shared PostgreSQL database. Synchronous, like its callers (the
/// journal's thread, the hub's call-id check), on two connections of its own so that the
/// journal's writes never wait for the hub's reads. A connection found lost is opened again
/// by the next call.
package final class PostgresLiveCallStore: LiveCallStore, @unchecked Sendable {
  // @unchecked: each connection slot is used only under its own lock.
  private let configuration: PostgresConfiguration
  private var writer: PostgresConnection?
  private let writerLock = Locked()
  private var reader: PostgresConnection?
  private let readerLock = Locked()
  /// Where call-id lookups wait for the reader, so that no caller's thread does.
  private let lookups = DispatchQueue(label: "dialtone.call-id-lookups")
  private var writerClosed = false
  private var readerClosed = false

  package init(url: String, preparedStatements: Int = 256) throws {
    configuration = PostgresConfiguration(url: url, preparedStatements: preparedStatements)
    let writer = try PostgresConnection(configuration)
    try PostgresSchema.migrations.apply(on: writer)
    self.writer = writer
    reader = try PostgresConnection(configuration)
  }

  /// Connects and migrates off the caller's thread: connecting blocks for up to its timeout.
  package static func open(url: String, preparedStatements: Int = 256) async throws -> PostgresLiveCallStore {
    do {
      return try await PostgresThreadPool.detached(name: "postgres-open") {
        try PostgresLiveCallStore(url: url, preparedStatements: preparedStatements)
      }
    } catch {
      throw PostgresStoreError(url: url, underlying: error)
    }
  }

  package func write(_ changes: [LiveCallChange]) throws {
    _ = try write(changes, fence: nil)
  }

  package func write(_ changes: [LiveCallChange], fencedBy epochs: [CallID: Int64]) throws -> Set<CallID> {
    try write(changes, fence: epochs)
  }

  /// One transaction per batch, in flights rather than a round trip per statement: unfenced, one
  /// flight (BEGIN, the writes, COMMIT); fenced, two: BEGIN with each call's lock and fence check,
  /// then the writes the checks allow and COMMIT. A group call's end adds one, since its history
  /// rows depend on whether the record was new.
  private func write(_ changes: [LiveCallChange], fence epochs: [CallID: Int64]?) throws -> Set<CallID> {
    try withWriter { connection in
      try connection.pipelinedTransaction { transaction in
        var refused: Set<CallID> = []
        var allowed: [FenceKey: Bool] = [:]
        if let epochs { allowed = try Self.checkFences(of: changes, epochs: epochs, in: transaction) }
        // What a check made after an earlier change of this batch would have seen: a call ended
        // in the batch has left the live table for the history, so its later changes are refused.
        var endedInBatch: Set<FenceKey> = []
        for change in changes {
          if epochs != nil, let callId = change.fencedCallId {
            if refused.contains(callId) { continue }
            let key = FenceKey(callId: callId, group: change.isGroupCall)
            guard allowed[key] == true, !endedInBatch.contains(key) else {
              refused.insert(callId)
              continue
            }
            switch change {
            case .ended, .groupEnded: endedInBatch.insert(key)
            case .put, .signal, .groupLive: break
            }
          }
          switch change {
          case .put(let call): Self.put(call, epoch: epochs?[call.callId] ?? 1, in: transaction)
          case .signal(let callId, let message):
            transaction.append(
              "INSERT INTO live_call_signals (call_id, message) VALUES ($1, $2)",
              [.text(callId), .text(MessageCodec.encodeString(message, seq: nil))])
          case .ended(let record, let callerDevice, let blocked):
            transaction.append("DELETE FROM live_call_signals WHERE call_id = $1", [.text(record.callId)])
            transaction.append("DELETE FROM live_calls WHERE call_id = $1", [.text(record.callId)])
            let insert = PostgresStore.insertStatement(record, callerDevice: callerDevice, blocked: blocked)
            transaction.append(insert.sql, insert.parameters)
          case .groupLive(let record, let silenced, let state):
            transaction.append(
              """
              INSERT INTO live_group_calls (call_id, record, silenced, state, epoch) VALUES ($1, $2, $3, $4, $5)
              ON CONFLICT (call_id) DO UPDATE SET record = excluded.record, silenced = excluded.silenced,
                state = excluded.state, epoch = GREATEST(live_group_calls.epoch, excluded.epoch)
              """,
              [
                .text(record.callId), .text(String(decoding: MessageCodec.encode(record), as: UTF8.self)),
                .text(silenced.sorted().joined(separator: "\n")),
                PostgresValue(state.map { String(decoding: MessageCodec.encode($0), as: UTF8.self) }),
                .int64(epochs?[record.callId] ?? 1),
              ])
          case .groupEnded(let record, let silenced):
            transaction.append("DELETE FROM live_group_calls WHERE call_id = $1", [.text(record.callId)])
            try PostgresStore.insertGroupCall(record, silenced: silenced, on: transaction.flushed())
          }
        }
        return refused
      }
    }
  }

  /// A fence check: a call, and whether as a group call (which tables it reads).
  private struct FenceKey: Hashable, Comparable {
    let callId: CallID
    let group: Bool

    static func < (lhs: FenceKey, rhs: FenceKey) -> Bool {
      (lhs.callId, lhs.group ? 1 : 0) < (rhs.callId, rhs.group ? 1 : 0)
    }
  }

  /// The first flight of a fenced batch: each call's lock (in call-id order, as a take-over takes
  /// them) and whether a node whose ownership of it is its epoch may still write it: no later
  /// owner took it over (the live row's epoch is not above it) and it did not end (a late write
  /// must not bring an ended call back). The locks are held to the end of the transaction, so no
  /// take-over slips in between a check and the writes; each check is its own statement, after
  /// the lock's, so that it sees what a take-over it waited for committed.
  private static func checkFences(
    of changes: [LiveCallChange], epochs: [CallID: Int64], in transaction: PostgresPipelinedTransaction
  ) throws -> [FenceKey: Bool] {
    let keys = Set(
      changes.compactMap { change in change.fencedCallId.map { FenceKey(callId: $0, group: change.isGroupCall) } }
    ).sorted()
    guard !keys.isEmpty else { return [:] }
    var checks: [(key: FenceKey, position: Int)] = []
    var locked: Set<CallID> = []
    for key in keys {
      if locked.insert(key.callId).inserted {
        let lock = PostgresSchema.lockStatement(.liveCall, key.callId)
        transaction.append(lock.sql, lock.parameters)
      }
      let position = transaction.append(
        key.group
          ? """
          SELECT (SELECT epoch FROM live_group_calls WHERE call_id = $1),
            EXISTS (SELECT 1 FROM group_calls WHERE call_id = $1)
          """
          : """
          SELECT (SELECT epoch FROM live_calls WHERE call_id = $1), EXISTS (SELECT 1 FROM calls WHERE call_id = $1)
          """, [.text(key.callId)])
      checks.append((key, position))
    }
    let results = try transaction.flush()
    var allowed: [FenceKey: Bool] = [:]
    for (key, position) in checks {
      let row = results[position].first
      // A live row decides (its epoch not above ours); without one, only a call never ended.
      if let current = try row?.int64(0) {
        allowed[key] = current <= epochs[key.callId] ?? 1
      } else {
        allowed[key] = try row?.bool(1) != true
      }
    }
    return allowed
  }

  private static func put(_ call: LiveCallSnapshot, epoch: Int64, in transaction: PostgresPipelinedTransaction) {
    transaction.append(
      """
      INSERT INTO live_calls (call_id, caller_id, caller_device, caller_name, callee_id, video, created_at,
        phase, answered_by, answered_at, ring_deadline, caller_grace_deadline, answerer_grace_deadline, invite, accept,
        blocked, epoch)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
      ON CONFLICT (call_id) DO UPDATE SET caller_id = excluded.caller_id, caller_device = excluded.caller_device,
        caller_name = excluded.caller_name, callee_id = excluded.callee_id, video = excluded.video,
        created_at = excluded.created_at, phase = excluded.phase, answered_by = excluded.answered_by,
        answered_at = excluded.answered_at, ring_deadline = excluded.ring_deadline,
        caller_grace_deadline = excluded.caller_grace_deadline,
        answerer_grace_deadline = excluded.answerer_grace_deadline, invite = excluded.invite, accept = excluded.accept,
        blocked = excluded.blocked, epoch = GREATEST(live_calls.epoch, excluded.epoch)
      """,
      [
        .text(call.callId), .text(call.caller.userId), .text(call.caller.deviceId), PostgresValue(call.caller.name),
        .text(call.calleeId), .bool(call.video), .int64(call.createdAt), .text(call.phase.rawValue),
        PostgresValue(call.answeredBy), PostgresValue(call.answeredAt), .int64(call.ringDeadline),
        PostgresValue(call.callerGraceDeadline), PostgresValue(call.answererGraceDeadline),
        .text(MessageCodec.encodeString(call.invite, seq: nil)),
        PostgresValue(call.accept.map { MessageCodec.encodeString($0, seq: nil) }), .bool(call.blocked),
        .int64(epoch),
      ])
    if call.phase == .accepted {
      transaction.append("DELETE FROM live_call_signals WHERE call_id = $1", [.text(call.callId)])
    }
  }

  package func callsEnded(since: Int64) throws -> [RecentlyEndedCall] {
    try withWriter { connection in
      // Latest records first, until a page holds nothing as recent: records are added as calls
      // end, so this reads the recent ends and no more of a long history.
      var ended: [RecentlyEndedCall] = []
      var before = Int64.max
      while true {
        let rows = try connection.query(
          """
          SELECT \(PostgresStore.callColumns), caller_device, seq, blocked FROM calls WHERE seq < $1
          ORDER BY seq DESC LIMIT 256
          """, [.int64(before)])
        var recent = false
        for row in rows {
          guard let seq = try row.int64(11) else { continue }
          before = seq
          let (record, call) = try Self.ended(row, blockedAt: 12)
          guard (record.endedAt ?? 0) >= since else { continue }
          recent = true
          if let call { ended.append(call) }
        }
        if rows.count < 256 || !recent { break }
      }
      return ended.reversed()
    }
  }

  package func liveCalls() throws -> [StoredLiveCall] {
    try withWriter { connection in try Self.liveCalls(on: connection, only: nil) }
  }

  /// The named calls only, their epochs raised first, on the reader's connection (a node taking
  /// a few calls over does not wait for, nor hold up, the journal's writes).
  package func takeOver(_ callIds: Set<CallID>) throws -> [StoredLiveCall] {
    guard !callIds.isEmpty else { return [] }
    return try withReader { connection in
      try connection.transaction {
        for callId in callIds.sorted() {
          try PostgresSchema.lock(.liveCall, callId, on: connection)
          try connection.query("UPDATE live_calls SET epoch = epoch + 1 WHERE call_id = $1", [.text(callId)])
        }
        return try Self.liveCalls(on: connection, only: callIds)
      }
    }
  }

  package func endedCalls(_ callIds: Set<CallID>, since: Int64) throws -> [RecentlyEndedCall] {
    guard !callIds.isEmpty else { return [] }
    return try withReader { connection in
      var ended: [RecentlyEndedCall] = []
      for callId in callIds.sorted() {
        for row in try connection.query(
          "SELECT \(PostgresStore.callColumns), caller_device, blocked FROM calls WHERE call_id = $1", [.text(callId)])
        {
          let (record, call) = try Self.ended(row, blockedAt: 11)
          if (record.endedAt ?? 0) >= since, let call { ended.append(call) }
        }
      }
      return ended
    }
  }

  /// A history row of `callColumns`, the caller's device and (at `blockedAt`) whether a block
  /// silenced it: its record, and the ended call the router can restore (not without a device).
  private static func ended(_ row: PostgresRow, blockedAt: Int) throws -> (CallRecord, RecentlyEndedCall?) {
    let record = try PostgresStore.record(PostgresRow(columns: [], values: Array(row.values.prefix(10))))
    guard let device = try row.string(10) else { return (record, nil) }
    return (record, RecentlyEndedCall(record: record, callerDevice: device, blocked: try row.bool(blockedAt) == true))
  }

  /// Every live call, or the named ones.
  private static func liveCalls(on connection: PostgresConnection, only callIds: Set<CallID>?) throws
    -> [StoredLiveCall]
  {
    var signals: [CallID: [ServerMessage]] = [:]
    var calls: [PostgresRow] = []
    // One pass over every call, or one per named call.
    let filters: [(clause: String, parameters: [PostgresValue])] =
      callIds.map { $0.sorted().map { (" WHERE call_id = $1", [.text($0)]) } } ?? [("", [])]
    for filter in filters {
      for row in try connection.query(
        "SELECT call_id, message FROM live_call_signals\(filter.clause) ORDER BY seq", filter.parameters)
      {
        guard let callId = try row.string(0), let text = try row.string(1),
          let message = try? MessageCodec.decodeServerMessage(text).message
        else { continue }
        signals[callId, default: []].append(message)
      }
      calls += try connection.query(
        """
        SELECT call_id, caller_id, caller_device, caller_name, callee_id, video, created_at, phase, answered_by,
          answered_at, ring_deadline, caller_grace_deadline, answerer_grace_deadline, invite, accept, blocked, epoch
        FROM live_calls\(filter.clause) ORDER BY created_at, call_id
        """, filter.parameters)
    }
    return try calls.compactMap { row -> StoredLiveCall? in
      guard let callId = try row.string(0), let callerId = try row.string(1), let callerDevice = try row.string(2),
        let calleeId = try row.string(4), let createdAt = try row.int64(6),
        let phase = try row.string(7).flatMap(LiveCallSnapshot.Phase.init(rawValue:)),
        let ringDeadline = try row.int64(10), let inviteText = try row.string(13),
        let invite = try? MessageCodec.decodeServerMessage(inviteText).message
      else { return nil }
      let accept = try row.string(14).flatMap { try? MessageCodec.decodeServerMessage($0).message }
      let snapshot = LiveCallSnapshot(
        callId: callId, caller: Identity(userId: callerId, deviceId: callerDevice, name: try row.string(3)),
        calleeId: calleeId, video: try row.bool(5) == true, createdAt: createdAt, phase: phase,
        answeredBy: try row.string(8), answeredAt: try row.int64(9), ringDeadline: ringDeadline,
        callerGraceDeadline: try row.int64(11), answererGraceDeadline: try row.int64(12), invite: invite,
        accept: accept, blocked: try row.bool(15) == true)
      return StoredLiveCall(
        snapshot: snapshot, callerSignals: phase == .ringing ? signals[callId] ?? [] : [],
        epoch: try row.int64(16) ?? 1)
    }
  }

  package func liveGroupCalls() throws -> [StoredGroupCall] {
    try withWriter { connection in try Self.liveGroupCalls(on: connection, only: nil) }
  }

  /// The named group calls, their epochs raised first, as `takeOver` does for 1:1 calls.
  package func takeOverGroupCalls(_ callIds: Set<CallID>) throws -> [StoredGroupCall] {
    guard !callIds.isEmpty else { return [] }
    return try withReader { connection in
      try connection.transaction {
        for callId in callIds.sorted() {
          try PostgresSchema.lock(.liveCall, callId, on: connection)
          try connection.query(
            "UPDATE live_group_calls SET epoch = epoch + 1 WHERE call_id = $1 AND state IS NOT NULL", [.text(callId)])
        }
        return try Self.liveGroupCalls(on: connection, only: callIds)
      }
    }
  }

  /// Every live group call with a stored state (one written before the state was journaled has
  /// none, and is not taken over), or the named ones.
  private static func liveGroupCalls(on connection: PostgresConnection, only callIds: Set<CallID>?) throws
    -> [StoredGroupCall]
  {
    let filters: [(clause: String, parameters: [PostgresValue])] =
      callIds.map { $0.sorted().map { (" AND call_id = $1", [.text($0)]) } } ?? [("", [])]
    var calls: [StoredGroupCall] = []
    for filter in filters {
      for row in try connection.query(
        "SELECT state, epoch FROM live_group_calls WHERE state IS NOT NULL\(filter.clause) ORDER BY call_id",
        filter.parameters)
      {
        guard let text = try row.string(0),
          let snapshot = try? MessageCodec.decode(GroupCallSnapshot.self, from: Array(text.utf8), options: .lenient)
        else { continue }
        calls.append(StoredGroupCall(snapshot: snapshot, epoch: try row.int64(1) ?? 1))
      }
    }
    return calls
  }

  package func completeInterruptedGroupCalls() throws -> Int {
    try withWriter { connection in
      try connection.transaction {
        // Locked: two nodes starting together record each call once.
        let rows = try connection.query("SELECT call_id, record, silenced FROM live_group_calls FOR UPDATE")
        for row in rows {
          guard let text = try row.string(1),
            let record = try? MessageCodec.decode(GroupCallRecord.self, from: Array(text.utf8), options: .lenient)
          else { continue }
          let silenced = Set((try row.string(2) ?? "").split(separator: "\n").map(String.init))
          try PostgresStore.insertGroupCall(record, silenced: silenced, on: connection)
        }
        try connection.query("DELETE FROM live_group_calls")
        return rows.count
      }
    }
  }

  package func isCallIdUsed(_ callId: CallID) async throws -> Bool {
    try await withCheckedThrowingContinuation { continuation in
      lookups.async { continuation.resume(with: Result { try self.isCallIdUsedNow(callId) }) }
    }
  }

  private func isCallIdUsedNow(_ callId: CallID) throws -> Bool {
    try withReader { connection in
      try connection.query(
        """
        SELECT EXISTS (SELECT 1 FROM calls WHERE call_id = $1) OR EXISTS (SELECT 1 FROM live_calls WHERE call_id = $1)
          OR EXISTS (SELECT 1 FROM group_calls WHERE call_id = $1)
          OR EXISTS (SELECT 1 FROM live_group_calls WHERE call_id = $1)
        """, [.text(callId)]
      ).first?.bool(0) == true
    }
  }

  /// Closes both connections for good (the server stopped): later calls fail.
  package func close() {
    writerLock.withLock {
      writer?.close()
      writer = nil
      writerClosed = true
    }
    readerLock.withLock {
      reader?.close()
      reader = nil
      readerClosed = true
    }
  }

  private func withWriter<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
    try writerLock.withLock {
      guard !writerClosed else { throw PostgresError.connectionFailed(message: "the live-call store is closed") }
      return try Self.use(&writer, configuration, body)
    }
  }

  private func withReader<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
    try readerLock.withLock {
      guard !readerClosed else { throw PostgresError.connectionFailed(message: "the live-call store is closed") }
      return try Self.use(&reader, configuration, body)
    }
  }

  /// Runs `body` on the slot's connection, first opening a new one if the old one was lost.
  private static func use<T>(
    _ slot: inout PostgresConnection?, _ configuration: PostgresConfiguration, _ body: (PostgresConnection) throws -> T
  ) throws -> T {
    if let connection = slot, !connection.isAlive {
      connection.close()
      slot = nil
    }
    let connection = try slot ?? PostgresConnection(configuration)
    slot = connection
    do {
      return try body(connection)
    } catch let error as PostgresError where error.isConnectionLost {
      connection.close()
      slot = nil
      throw error
    }
  }
}
