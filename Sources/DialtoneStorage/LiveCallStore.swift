import DialtoneCalls
import DialtoneProtocol

/// Where live calls are kept so that a restart ends none of them, and the authority on which
/// call ids were ever used. Synchronous: `CallJournal` writes from a thread of its own, and the
/// hub asks about a call id while it handles an invite (one primary-key lookup).
package protocol LiveCallStore: Sendable {
  /// Applies one batch of changes in one transaction, in order.
  func write(_ changes: [LiveCallChange]) throws
  /// Every call that was live when the server stopped.
  func liveCalls() throws -> [StoredLiveCall]
  /// Writes the record of every group call that was live when the server stopped (they do not
  /// outlive a restart), ended `serverRestart` as of its last change; returns how many.
  func completeInterruptedGroupCalls() throws -> Int
  /// The 1:1 calls that ended at `since` or later.
  func callsEnded(since: Int64) throws -> [RecentlyEndedCall]
  /// Whether any call, 1:1 or group, live or ended, ever had this id.
  func isCallIdUsed(_ callId: CallID) throws -> Bool
  /// The named calls that are live (a cluster node taking them over).
  func liveCalls(_ callIds: Set<CallID>) throws -> [StoredLiveCall]
  /// The named 1:1 calls that ended at `since` or later.
  func endedCalls(_ callIds: Set<CallID>, since: Int64) throws -> [RecentlyEndedCall]
}

extension LiveCallStore {
  /// Read whole and filtered: a store a cluster does not use.
  package func liveCalls(_ callIds: Set<CallID>) throws -> [StoredLiveCall] {
    try liveCalls().filter { callIds.contains($0.snapshot.callId) }
  }

  package func endedCalls(_ callIds: Set<CallID>, since: Int64) throws -> [RecentlyEndedCall] {
    try callsEnded(since: since).filter { callIds.contains($0.record.callId) }
  }
}
