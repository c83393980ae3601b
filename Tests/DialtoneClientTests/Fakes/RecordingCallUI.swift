import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation

/// One ordered log of what reached the OS UI, the OS actions and the media devices.
final class CallLog: Sendable {
  enum Entry: Equatable, Sendable {
    case reportIncoming(UUID, handle: String, name: String?, video: Bool)
    case outgoingConnecting(UUID)
    case outgoingConnected(UUID)
    case ended(UUID, SystemCallEndReason)
    case updated(UUID, video: Bool)
    case request(SystemCallTransaction)
    case fulfilled(UUID)
    case failed(UUID)
    case prepareAudio(video: Bool)
    case audioOn
    case audioOff
    case cameraOn
    case cameraOff
  }

  private let storage = Locked<[Entry]>([])

  var entries: [Entry] { storage.current }
  func append(_ entry: Entry) { storage.withLock { $0.append(entry) } }
  func contains(_ entry: Entry) -> Bool { entries.contains(entry) }
}

/// A fake `SystemCallUI` that records every report and answers it like CallKit would:
/// `refuseIncoming` refuses reports, a UUID it shows or showed before (a call since ended) is
/// refused, and transactions are passed to `onRequest` (the test plays the OS and sends the
/// action back).
final class RecordingCallUI: SystemCallUI, Sendable {
  struct Refused: Error {}
  let log: CallLog
  private struct Screen: Sendable {
    var refusing = false
    var shown: Set<UUID> = []
    /// Every UUID ever reported or started, shown now or not.
    var seen: Set<UUID> = []
    var requestHandler: (@Sendable (SystemCallTransaction) -> (any Error)?)?
  }
  private let screen = Locked(Screen())

  init(log: CallLog) { self.log = log }

  var refuseIncoming: Bool {
    get { screen.withLock { $0.refusing } }
    set { screen.withLock { $0.refusing = newValue } }
  }

  /// Decides each transaction's answer (nil: accepted); default: accepted.
  func onRequest(_ handler: @escaping @Sendable (SystemCallTransaction) -> (any Error)?) {
    screen.withLock { $0.requestHandler = handler }
  }

  var showing: Set<UUID> { screen.withLock { $0.shown } }
  var everSeen: Set<UUID> { screen.withLock { $0.seen } }

  func reportNewIncomingCall(_ call: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void) {
    log.append(.reportIncoming(call.uuid, handle: call.handle, name: call.displayName, video: call.hasVideo))
    let refused: Bool = screen.withLock { screen in
      if screen.refusing || screen.seen.contains(call.uuid) { return true }
      screen.shown.insert(call.uuid)
      screen.seen.insert(call.uuid)
      return false
    }
    // CallKit answers on its own queue, later.
    Task { completion(refused ? Refused() : nil) }
  }

  func reportOutgoingCallStartedConnecting(uuid: UUID) { log.append(.outgoingConnecting(uuid)) }
  func reportOutgoingCallConnected(uuid: UUID) { log.append(.outgoingConnected(uuid)) }
  func reportCallEnded(uuid: UUID, reason: SystemCallEndReason) {
    _ = screen.withLock { $0.shown.remove(uuid) }
    log.append(.ended(uuid, reason))
  }
  func reportCallUpdated(uuid: UUID, hasVideo: Bool) { log.append(.updated(uuid, video: hasVideo)) }

  func request(_ transaction: SystemCallTransaction, completion: @escaping @Sendable ((any Error)?) -> Void) {
    log.append(.request(transaction))
    if case .startCall(let uuid, _, _, _) = transaction {
      screen.withLock { screen in
        screen.shown.insert(uuid)
        screen.seen.insert(uuid)
      }
    }
    let handler = screen.withLock { $0.requestHandler }
    let error = handler?(transaction)
    Task { completion(error) }
  }
}

/// A CallKit action's settlement, recorded.
struct RecordingActionHandle: SystemCallActionHandle {
  let id: UUID
  let log: CallLog
  func fulfill() { log.append(.fulfilled(id)) }
  func fail() { log.append(.failed(id)) }
}

/// A fake audio session and camera.
struct RecordingMedia: CallMediaControl {
  let log: CallLog
  func prepareAudio(video: Bool) { log.append(.prepareAudio(video: video)) }
  func audioSessionActivated() { log.append(.audioOn) }
  func audioSessionDeactivated() { log.append(.audioOff) }
  func startCamera() { log.append(.cameraOn) }
  func stopCamera() { log.append(.cameraOff) }
}
