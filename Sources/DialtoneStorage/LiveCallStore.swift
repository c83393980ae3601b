import DialtoneCalls
import DialtoneProtocol

/// Where live calls are kept so that a restart ends none of them, and the authority on which
/// call ids were ever used. Synchronous but for the call-id lookup: `CallJournal` writes from a
/// thread of its own and the rest is read at start, while the hub asks about a call id mid-way
/// through an invite and must not wait for the answer on its thread.
package protocol LiveCallStore: Sendable {
  /// Applies one batch of changes in one transaction, in order.
  func write(_ changes: [LiveCallChange]) throws
  /// The same, fenced (cluster mode): a call's changes (1:1 or group) are written only while
  /// the writer still owns the call — `epochs` holds the writer's epoch of each call (absent: 1), and a
  /// change is refused when a later owner took the call over (a higher epoch) or when the call
  /// already ended. Returns the calls whose changes were refused; the rest are written.
  func write(_ changes: [LiveCallChange], fencedBy epochs: [CallID: Int64]) throws -> Set<CallID>
  /// Every 1:1 call that was live when the server stopped.
  func liveCalls() throws -> [StoredLiveCall]
  /// Writes the record of every group call that was live when the server stopped (they do not
  /// outlive a restart), ended `serverRestart` as of its last change; returns how many.
  func completeInterruptedGroupCalls() throws -> Int
  /// The 1:1 calls that ended at `since` or later.
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall]
  /// Whether any call, 1:1 or group, live or ended, ever had this id. Answered off the caller's
  /// thread (a thread of the store's own), however slow the database is.
  func isCallIdUsed(_ callId: CallID) async throws -> Bool
  /// The same, answered through `answer` (on any thread) for a caller that is not a task (the
  /// hub): a store that looks up on a thread of its own answers from there, with no task started
  /// and resumed on the way (two thread wake-ups per invite fewer).
  func isCallIdUsed(_ callId: CallID, answer: @escaping @Sendable (Result<Bool, any Error>) -> Void)
  /// Every call id the store holds (1:1 and group, live and ended) in a filter sized for what is
  /// to come, read at start-up, for a server that is the only one recording ids in this store
  /// (`CallDesk.usedIds`). Nil: the store does not offer one (ids are asked about one by one).
  func usedCallIds() throws -> UsedCallIdFilter?
  /// The named 1:1 calls that are live, taken over by the caller (a cluster node): each one's epoch
  /// is raised, so that from now on the store refuses the writes of whoever ran it before.
  func takeOver(_ callIds: Set<CallID>) throws -> [StoredLiveCall]
  /// The named 1:1 calls that ended at `since` or later.
  func endedCalls(_ callIds: Set<CallID>, since: Int64) throws -> [RecentlyEndedCall]
  /// Every live group call whose state the journal holds (cluster mode: the calls a node may
  /// have to take over).
  func liveGroupCalls() throws -> [StoredGroupCall]
  /// The named live group calls, taken over by the caller like `takeOver`'s 1:1 calls: each
  /// one's epoch is raised, so that the store refuses the writes of whoever ran it before.
  func takeOverGroupCalls(_ callIds: Set<CallID>) throws -> [StoredGroupCall]
}

extension LiveCallStore {
  /// Read whole and filtered, with no epochs: a store a cluster does not use.
  package func takeOver(_ callIds: Set<CallID>) throws -> [StoredLiveCall] {
    try liveCalls().filter { callIds.contains($0.snapshot.callId) }
  }

  /// Unfenced: a store a cluster does not use has one writer.
  package func write(_ changes: [LiveCallChange], fencedBy epochs: [CallID: Int64]) throws -> Set<CallID> {
    try write(changes)
    return []
  }

  package func endedCalls(_ callIds: Set<CallID>, since: Int64) throws -> [RecentlyEndedCall] {
    try callsEnded(since: since).filter { callIds.contains($0.record.callId) }
  }

  /// Through a task that awaits the store's own answer.
  package func isCallIdUsed(_ callId: CallID, answer: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
    Task {
      do {
        answer(.success(try await isCallIdUsed(callId)))
      } catch {
        answer(.failure(error))
      }
    }
  }

  /// None: every new id is asked about.
  package func usedCallIds() throws -> UsedCallIdFilter? { nil }

  /// None: a store a cluster does not use completes its group calls at start instead.
  package func liveGroupCalls() throws -> [StoredGroupCall] { [] }

  package func takeOverGroupCalls(_ callIds: Set<CallID>) throws -> [StoredGroupCall] { [] }
}
