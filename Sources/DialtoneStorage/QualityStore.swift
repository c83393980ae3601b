import DialtoneProtocol

/// What storing a report came to.
public enum QualityRecordResult: Sendable, Equatable {
  case stored
  /// The device already sent its final report for the call.
  case finalAlreadyStored
  /// `maxDevicesPerCall` other devices have reports for the call.
  case tooManyDevices
}

/// Where call-quality reports are kept, next to the call history.
public protocol QualityStore: Sendable {
  /// Keeps the device's report for the call, replacing its earlier one unless that was final.
  func recordQuality(callId: CallID, _ report: StoredQualityReport, maxDevicesPerCall: Int) async throws
    -> QualityRecordResult
  func qualityReports(of callId: CallID) async throws -> [StoredQualityReport]
  /// One call of the history, if it ended and `userId` took part (a call the callee blocked is
  /// the caller's alone unless `blocked` is `.show`).
  func call(_ callId: CallID, visibleTo userId: String, blocked: BlockedCallsInHistory) async throws -> CallRecord?
  /// The latest calls of every user (the admin dashboard), newest first.
  func recentCalls(limit: Int) async throws -> [(CallRecord, [StoredQualityReport])]
}

package enum QualityReportLimits {
  /// Devices whose reports one call keeps (a user signed in on many devices cannot grow it).
  package static let devicesPerCall = 8
}
