import DialtoneClient
import DialtoneProtocol
import Foundation

/// One ordered log of what the coordinator did to the OS UI and to signaling.
final class CallLog: @unchecked Sendable {
  enum Entry: Equatable, Sendable {
    case reportIncoming(UUID, handle: String, name: String?, video: Bool)
    case outgoingConnecting(UUID)
    case outgoingConnected(UUID)
    case ended(UUID, SystemCallEndReason)
    case connect(CallID)
    case answer(CallID)
    case end(CallID, LocalEndCause)
    case muted(CallID, Bool)
    case held(CallID, Bool)
    case dtmf(CallID, String)
    case audioOn
    case audioOff
  }

  private let lock = NSLock()
  private var storage: [Entry] = []

  var entries: [Entry] { lock.withLock { storage } }
  func append(_ entry: Entry) { lock.withLock { storage.append(entry) } }
}

/// A fake `SystemCallUI` that records every report; `refuseIncoming` makes reports throw.
final class RecordingCallUI: SystemCallUI, @unchecked Sendable {
  struct Refused: Error {}
  let log: CallLog
  private let lock = NSLock()
  private var refusing = false

  init(log: CallLog) { self.log = log }

  var refuseIncoming: Bool {
    get { lock.withLock { refusing } }
    set { lock.withLock { refusing = newValue } }
  }

  func reportIncomingCall(uuid: UUID, handle: String, displayName: String?, hasVideo: Bool) async throws {
    log.append(.reportIncoming(uuid, handle: handle, name: displayName, video: hasVideo))
    if refuseIncoming { throw Refused() }
  }
  func reportOutgoingCallStartedConnecting(uuid: UUID) async { log.append(.outgoingConnecting(uuid)) }
  func reportOutgoingCallConnected(uuid: UUID) async { log.append(.outgoingConnected(uuid)) }
  func reportCallEnded(uuid: UUID, reason: SystemCallEndReason) async { log.append(.ended(uuid, reason)) }
}

/// A fake `CallSignalingActions` recording into the same log.
struct RecordingSignaling: CallSignalingActions {
  let log: CallLog
  func connectForPushedCall(_ callId: CallID) async { log.append(.connect(callId)) }
  func answer(_ callId: CallID) async { log.append(.answer(callId)) }
  func end(_ callId: CallID, cause: LocalEndCause) async { log.append(.end(callId, cause)) }
  func setMuted(_ callId: CallID, muted: Bool) async { log.append(.muted(callId, muted)) }
  func setHeld(_ callId: CallID, held: Bool) async { log.append(.held(callId, held)) }
  func playDTMF(_ callId: CallID, digits: String) async { log.append(.dtmf(callId, digits)) }
  func audioSessionActivated() async { log.append(.audioOn) }
  func audioSessionDeactivated() async { log.append(.audioOff) }
}
