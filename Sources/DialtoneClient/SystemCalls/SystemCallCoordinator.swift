import DialtoneProtocol
import DialtoneSupport
import Foundation

/// The OS call-UI rules (CallKit/PushKit on iOS) for incoming and outgoing Dialtone calls, as
/// a pure value: `handle(_:now:)` takes one event and returns the effects to run, in order.
/// `SystemCallSession` runs it; tests drive it directly with virtual time.
///
/// - A VoIP push is reported to the OS synchronously (`reportPlan`) before anything touches
///   the network; only its report's result (`.reported`) asks signaling to connect. A malformed
///   push, or one for a call already over on this device, is reported and ended at once, under
///   a fresh UUID the OS has never seen.
/// - An `invite` is reported unless a push already did; a refused report declines the call.
/// - The answer action is fulfilled once media connects, and never after its `timeoutDate`:
///   then (or on `timedOutPerforming`) the call ends as `.failed` and over signaling.
/// - Audio starts only when the OS activates the audio session; a provider reset ends every
///   call and turns audio off.
/// - Every ending of a call the OS still shows is reported with the matching reason,
///   including endings the OS did not ask for (ICE failure, signaling stopped for good).
/// - The camera starts only once a video call is answered or placed, and only while the app is
///   active: iOS lets no background app capture, so a video call answered on the lock screen
///   waits with its camera paused (the peer is told, `media-state`) until the app becomes
///   active; the camera pauses again when the app goes to the background.
/// - Group rings follow the same rules (a group push is reported at once, a `group-invite` unless
///   a push did, a pushed ring is resolved with `get-group`), with the group's own actions: answer
///   joins (fulfilled once this device's media is up), end declines a ring and leaves a joined
///   call, mute mutes the group call; hold is refused. Every ending of the group call for this
///   device (joined or declined elsewhere, missed, cancelled, ended, media or connection failed)
///   ends the OS call with the matching reason.
/// - Group calls this device starts (`.startGroup`, `.joinRoom`) are placed like 1:1 dials: the
///   start-call action is requested first and creates the call or joins the room; "started
///   connecting" is reported once the call is joined, "connected" once this device's media are
///   up. End cancels a call created here that nobody else joined yet (`group-end`) and leaves
///   any other. A room keeps the UUID of the id it was joined with, whatever id the server
///   gives its live call.
public struct SystemCallCoordinator: Sendable, Equatable {
  public enum Direction: String, Sendable, Equatable {
    case incoming
    case outgoing
  }

  public enum Stage: String, Sendable, Equatable {
    /// Incoming, reported to the OS, not answered yet.
    case ringing
    /// Incoming, answered in the OS UI, waiting to connect (a group call: joining, until this
    /// device's media is up).
    case answering
    /// Outgoing, not connected yet.
    case dialing
    /// Media connected.
    case connected
  }

  /// How this device starts an outgoing group call.
  public enum GroupStart: Sendable, Equatable {
    /// It creates the call; its members ring.
    case create(members: [String], title: String?)
    /// It joins (or starts) the live call of a room by name; nobody rings.
    case room(String)
  }

  public enum Timer: Hashable, Sendable {
    /// The pending answer action's `timeoutDate`.
    case answer(UUID)
    /// A pushed call waiting for its invite or `get-call` answer.
    case pushResolution(UUID)
  }

  public enum Event: Sendable, Equatable {
    /// The OS answered a report (`accepted` false: it refused or already shows the UUID).
    case reported(IncomingCallReport, accepted: Bool)
    /// An `invite` arrived over signaling.
    case invite(callId: CallID, handle: String, displayName: String?, video: Bool)
    /// The server's `get-call` answer for a call (nil: not found, no answer).
    case resolved(CallID, CallState?)
    /// A `group-invite` rang this device over signaling (`handle`: the creator; `displayName`:
    /// the title, or the creator's name).
    case groupInvite(callId: CallID, handle: String, displayName: String?, video: Bool)
    /// The server's `get-group` answer for a group call (nil: not found, no answer), with this
    /// user's id (nil: not known yet).
    case groupResolved(CallID, GroupCallState?, userId: String?)
    /// A group call changed state (`GroupCall.Event.state`).
    case groupState(CallID, GroupCall.State)
    /// This device's media in a group call changed: the Janus publisher connection
    /// (`GroupCall.Event.publisherState`), or the app's LiveKit room.
    case groupMedia(CallID, PeerConnectionState)
    /// LiveKit credentials for a joined group call (`GroupCall.Event.liveKit`).
    case groupLiveKit(CallID, url: String, token: String)
    /// The app places a call.
    case dial(callId: CallID, to: String, displayName: String?, video: Bool)
    /// The app starts a group call: this device creates it and its members ring.
    case startGroup(callId: CallID, members: [String], title: String?, video: Bool)
    /// The app joins a room by name; `callId` is the id proposed to the server, whose UUID the
    /// OS knows the call by even when the room's live call has another id.
    case joinRoom(callId: CallID, room: String, video: Bool)
    /// The server answered a room join: the room's live call id (nil: the join failed).
    case roomJoined(proposed: CallID, callId: CallID?)
    /// A group call's participants changed (`GroupCall.Event.participants`).
    case groupParticipants(CallID, GroupCallState)
    /// A call engine changed state.
    case engine(CallID, CallEngine.State)
    /// Glare: this device's outgoing call lost to the peer's call `survivor`.
    case glare(replaced: CallID, survivor: CallID)
    /// Signaling stopped for good (token refused, replaced, logged out): every call is over.
    case signalingStopped
    case action(SystemCallAction)
    /// `provider(_:timedOutPerforming:)`.
    case actionTimedOut(actionId: UUID)
    case transactionFailed(SystemCallTransaction)
    /// The user turned the camera on or off during a call.
    case videoToggled(CallID, enabled: Bool)
    /// The other side started or stopped sending video (a 1:1 call upgraded or back).
    case remoteVideo(CallID, sends: Bool)
    case audioActivated
    case audioDeactivated
    /// The app became active (true) or went to the background (false).
    case applicationActive(Bool)
    /// `providerDidReset`.
    case reset
    case timerFired(Timer)
  }

  public enum Effect: Sendable, Equatable {
    case reportIncoming(IncomingCallReport)
    case reportOutgoingStartedConnecting(UUID)
    case reportOutgoingConnected(UUID)
    case reportEnded(UUID, SystemCallEndReason)
    case request(SystemCallTransaction)
    case fulfill(actionId: UUID)
    case fail(actionId: UUID)
    /// Connect signaling if needed, then send `get-call` for the call (answer: `.resolved`).
    case connect(CallID)
    /// Start the outgoing call's engine (offer, invite).
    case dial(CallID, to: String, video: Bool)
    /// Accept now, or as soon as the invite arrives.
    case answer(CallID)
    /// Cancel, decline or hang up, as the call's state says.
    case end(CallID, LocalEndCause)
    case setMuted(CallID, Bool)
    case setHeld(CallID, Bool)
    case setVideo(CallID, Bool)
    case reportUpdated(UUID, hasVideo: Bool)
    case prepareAudio(video: Bool)
    case audioActivated
    case audioDeactivated
    case startCamera
    case stopCamera
    /// The call's camera is paused (the app cannot capture now: the peer is told the camera is
    /// off) or resumed; nothing changes what the user asked for.
    case cameraPaused(CallID, Bool)
    case arm(Timer, at: Date)
    case cancel(Timer)
    /// Connect signaling if needed, then send `get-group` for the group call (answer:
    /// `.groupResolved`).
    case resolveGroup(CallID)
    /// Join the group call (`group-join`): answers its ring, or joins a call known only from a
    /// push.
    case joinGroup(CallID, video: Bool)
    /// Refuse the group ring (`group-decline`: every device of this user stops ringing).
    case declineGroup(CallID)
    /// Leave the joined (or joining) group call (`group-leave`); it goes on for the others.
    case leaveGroup(CallID)
    case setGroupMuted(CallID, Bool)
    /// Create the group call (`group-create`; its members ring).
    case createGroup(CallID, members: [String], title: String?, video: Bool)
    /// Join the room (`room-join` proposing the call id; the answer comes back as `.roomJoined`).
    case joinRoom(CallID, room: String, video: Bool)
    /// End the group call for everyone (`group-end`: before anyone joined, it cancels the ring).
    case endGroupForAll(CallID)
    /// Connect the group call's LiveKit media (`GroupMediaControl.connect`).
    case connectGroupMedia(CallID, url: String, token: String, video: Bool, muted: Bool)
    case disconnectGroupMedia(CallID)
  }

  /// What the synchronous push report needs to know, kept where a PushKit thread can read it.
  public struct PushLedger: Sendable, Equatable {
    /// Calls that ended on this device recently, with the reason reported for them.
    public var ended: [CallID: SystemCallEndReason] = [:]
    public init() {}
  }

  /// The handle shown for a malformed push.
  public static let unknownHandle = "Unknown"
  /// How many ended calls the ledger remembers (a late push names one of the last few).
  public static let endedMemory = 32

  public let deviceId: String
  /// How long a pushed call may wait for its `invite` or its `get-call` answer before it ends
  /// as `.failed` (the "no answer / no connection" row of protocol.md section 9).
  public let pushResolutionTimeout: Duration

  public private(set) var calls: [UUID: Call] = [:]
  public private(set) var audioActive = false
  /// The app is active (in the foreground): only then may the camera capture.
  public private(set) var applicationActive: Bool
  public private(set) var ledger = PushLedger()
  private var endedOrder: [CallID] = []
  /// The UUID of each room call whose server call id differs from the id it was joined with.
  public private(set) var aliases: [CallID: UUID] = [:]
  /// Glare survivors to answer through the OS once it shows them.
  private var glareSurvivors: Set<CallID> = []

  /// - Parameters:
  ///   - deviceId: this device's id (to tell "accepted here" from "accepted elsewhere").
  ///   - applicationActive: whether the app is active now (a push-launched app is not).
  public init(deviceId: String, pushResolutionTimeout: Duration = .seconds(30), applicationActive: Bool = true) {
    self.deviceId = deviceId
    self.pushResolutionTimeout = pushResolutionTimeout
    self.applicationActive = applicationActive
  }

  public func call(_ callId: CallID) -> Call? { calls[uuid(for: callId)] }

  /// The UUID the OS knows a call by: a room's proposed id's, or the call id's own.
  public func uuid(for callId: CallID) -> UUID { aliases[callId] ?? CallUUIDs.uuid(for: callId) }

  public var activeCalls: [Call] { calls.values.sorted { $0.callId < $1.callId } }

  // MARK: The synchronous push report

  /// What to report for a VoIP push, decided without the network and without suspending.
  /// nil only when the OS said the push need not be reported (`mustReport` false, iOS 26.4)
  /// and there is no call to show.
  public static func reportPlan(for payload: [AnyHashable: Any], ledger: PushLedger, mustReport: Bool = true)
    -> IncomingCallReport?
  {
    let push: IncomingCallPush
    do {
      push = try IncomingCallPush(payload: payload)
    } catch {
      guard mustReport else { return nil }
      return IncomingCallReport(
        uuid: UUID(), callId: nil, handle: unknownHandle, displayName: nil, hasVideo: false, origin: .push,
        endAtOnce: .failed)
    }
    let ended = ledger.ended[push.callId]
    if ended != nil && !mustReport { return nil }
    // A call already over here was shown under its own UUID, and CallKit may refuse that UUID
    // again. A refused report with no call of that UUID active counts as a push not reported:
    // iOS kills the app, and after repeated kills stops its VoIP pushes. So the push is
    // reported, and ended, under a UUID CallKit has never seen (as a malformed one is).
    return IncomingCallReport(
      uuid: ended == nil ? CallUUIDs.uuid(for: push.callId) : UUID(), callId: push.callId, handle: push.callerHandle,
      displayName: push.isGroup ? groupDisplayName(title: push.title, creatorName: push.callerName) : push.callerName,
      hasVideo: push.hasVideo, origin: .push, endAtOnce: ended, isGroup: push.isGroup)
  }

  /// What to report for a VoIP push the app cannot take now. Before the first unlock after a
  /// reboot iOS may launch the app for a VoIP push while the Keychain (the installation id, the
  /// app's credentials) cannot be read, so no call can connect and no id may be made up. The
  /// push is reported all the same, as iOS requires, showing who called, under a fresh UUID,
  /// and ended at once as failed. Nothing is said over signaling: the call rings on on the
  /// user's other devices.
  public static func reportPlanWhileLocked(for payload: [AnyHashable: Any]) -> IncomingCallReport {
    var report =
      reportPlan(for: payload, ledger: PushLedger())
      ?? IncomingCallReport(
        uuid: UUID(), callId: nil, handle: unknownHandle, displayName: nil, hasVideo: false, origin: .push)
    report.uuid = UUID()
    report.endAtOnce = .failed
    return report
  }

  /// The name the OS shows for a group ring: its title, or the creator's name.
  public static func groupDisplayName(title: String?, creatorName: String?) -> String? {
    if let title, !title.isEmpty { return title }
    return creatorName
  }

  /// How a device woken by a push ends its OS call, from the `get-call` result for the pushed
  /// call (protocol.md section 9): nil while the call still rings or was accepted by this
  /// device; `state` nil means `not-found`, no answer or no connection.
  public static func endReason(forPushedCall state: CallState?, ownDeviceId: String) -> SystemCallEndReason? {
    guard let state else { return .failed }
    if state.state != .ringing, let callee = state.calleeDeviceId, callee != ownDeviceId {
      return .answeredElsewhere
    }
    switch state.state {
    case .ringing:
      return nil
    case .accepted:
      // Accepted by this device (another device's accept is handled above); an accepted call
      // without a callee device cannot be ours.
      return state.calleeDeviceId == nil ? .answeredElsewhere : nil
    case .ended:
      switch state.endReason {
      case .declined?, .busy?, .declinedElsewhere?: return .declinedElsewhere
      case .missed?: return .unanswered
      case .answeredElsewhere?: return .answeredElsewhere
      default: return .remoteEnded
      }
    }
  }

  /// How a device woken by a group push ends its OS call, from the `get-group` result for the
  /// pushed call: nil while this user is still rung (or is in the call on this device); `state`
  /// nil means `not-found`, no answer or no connection. `userId` is this user's id; without it
  /// only the call's own phase is read.
  ///
  /// This user's member state comes first: in the call (or was) on another device →
  /// `.answeredElsewhere`; declined → `.declinedElsewhere`. Then an ended call ends with its
  /// reason (cancelled by the creator → `.remoteEnded`, even though cancelling marks the ring
  /// missed), a ring that timed out for this member → `.unanswered`.
  public static func endReason(forPushedGroup state: GroupCallState?, userId: String?, ownDeviceId: String)
    -> SystemCallEndReason?
  {
    guard let state else { return .failed }
    let member = userId.flatMap { state.member($0) }
    if let member, member.state == .joined || member.state == .left, let device = member.deviceId,
      device != ownDeviceId
    {
      return .answeredElsewhere
    }
    if member?.state == .declined { return .declinedElsewhere }
    if state.state == .ended {
      if state.endReason != .cancelled && member?.state == .missed { return .unanswered }
      return SystemCallEndReason(group: state.endReason ?? .ended)
    }
    switch member?.state {
    case .missed?: return .unanswered
    case .left?: return .remoteEnded  // left here earlier: this ring is stale
    case .removed?: return .remoteEnded  // the owner took this user out
    case .invited?, .ringing?, .joined?, .declined?, nil: return nil
    }
  }

  // MARK: Transitions

  public mutating func handle(_ event: Event, now: Date) -> [Effect] {
    switch event {
    case .reported(let report, let accepted): return reported(report, accepted: accepted, now: now)
    case .invite(let callId, let handle, let name, let video):
      return invite(callId, handle: handle, displayName: name, video: video, group: false)
    case .resolved(let callId, let state): return resolved(callId, state)
    case .groupInvite(let callId, let handle, let name, let video):
      return invite(callId, handle: handle, displayName: name, video: video, group: true)
    case .groupResolved(let callId, let state, let userId): return groupResolved(callId, state, userId: userId)
    case .groupState(let callId, let state): return groupState(callId, state)
    case .groupMedia(let callId, let state): return groupMedia(callId, state)
    case .groupLiveKit(let callId, let url, let token): return groupLiveKit(callId, url: url, token: token)
    case .dial(let callId, let to, let name, let video): return dial(callId, to: to, displayName: name, video: video)
    case .startGroup(let callId, let members, let title, let video):
      return startGroup(callId, .create(members: members, title: title), video: video)
    case .joinRoom(let callId, let room, let video): return startGroup(callId, .room(room), video: video)
    case .roomJoined(let proposed, let callId): return roomJoined(proposed, callId)
    case .groupParticipants(let callId, let state): return groupParticipants(callId, state)
    case .engine(let callId, let state): return engine(callId, state)
    case .glare(_, let survivor): return glare(survivor: survivor)
    case .signalingStopped: return endAll(reason: .failed, cause: nil)
    case .action(let action): return perform(action)
    case .actionTimedOut(let id): return answerTimedOut(actionId: id)
    case .transactionFailed(let transaction): return transactionFailed(transaction)
    case .videoToggled(let callId, let enabled): return videoToggled(callId, enabled: enabled)
    case .remoteVideo(let callId, let sends): return remoteVideo(callId, sends: sends)
    case .audioActivated:
      guard !audioActive else { return [] }
      audioActive = true
      return [.audioActivated]
    case .audioDeactivated:
      guard audioActive else { return [] }
      audioActive = false
      return [.audioDeactivated]
    case .applicationActive(let active):
      return applicationActiveChanged(active)
    case .reset:
      // The OS already forgot every call: nothing is reported, everything is ended over
      // signaling, and audio goes off even if the OS never sends didDeactivate.
      audioActive = false
      return endAll(reason: nil, cause: .providerReset) + [.audioDeactivated]
    case .timerFired(.answer(let uuid)):
      guard let id = calls[uuid]?.answerAction else { return [] }
      return answerTimedOut(actionId: id)
    case .timerFired(.pushResolution(let uuid)):
      guard let call = calls[uuid], call.awaitingResolution, call.stage != .connected else { return [] }
      calls[uuid]?.resolved()
      return finish(uuid, reason: .failed)
    }
  }

  private mutating func reported(_ report: IncomingCallReport, accepted: Bool, now: Date) -> [Effect] {
    if let reason = report.endAtOnce { return [.reportEnded(report.uuid, reason)] }
    guard let callId = report.callId else { return [] }
    let uuid = report.uuid
    switch report.origin {
    case .push:
      if calls[uuid] != nil {
        // A repeated push, or the invite came first (its own report may still be on its way:
        // whichever report the OS accepted shows the call).
        calls[uuid]?.pushedToo(shown: accepted)
        return []
      }
      if let reason = ledger.ended[callId] {
        // It ended here between the report and its answer.
        return accepted ? [.reportEnded(uuid, reason)] : []
      }
      guard accepted else { return [] }  // Do Not Disturb, blocked: this device stays quiet
      calls[uuid] = Call(
        uuid: uuid, callId: callId, handle: report.handle, displayName: report.displayName, video: report.hasVideo,
        progress: .incoming(.pushed, .ringing(shown: true)),
        kind: report.isGroup ? .group(Group()) : .oneToOne(remoteVideo: false))
      return [
        .arm(.pushResolution(uuid), at: now.addingTimeInterval(pushResolutionTimeout.seconds)),
        report.isGroup ? .resolveGroup(callId) : .connect(callId),
      ]
    case .invite:
      guard let call = calls[uuid] else {
        // It ended before the OS answered: take it off the screen again.
        if accepted, let reason = ledger.ended[callId] { return [.reportEnded(uuid, reason)] }
        return []
      }
      guard !call.shown else { return [] }
      guard accepted else {
        // Refused as a duplicate of the push's report: the call is on screen all the same.
        if call.pushed { return [] }
        calls[uuid] = nil
        return endOverSignaling(call, .systemRejected)
      }
      calls[uuid]?.reportAccepted()
      if glareSurvivors.remove(callId) != nil { return [.request(.answer(uuid: uuid))] }
      return []
    }
  }

  private mutating func invite(_ callId: CallID, handle: String, displayName: String?, video: Bool, group: Bool)
    -> [Effect]
  {
    let uuid = CallUUIDs.uuid(for: callId)
    if let call = calls[uuid] {
      guard call.isGroup == group else { return [] }
      let resolved = resolvedHere(uuid)
      calls[uuid]?.invited()
      return resolved
    }
    guard ledger.ended[callId] == nil else { return [] }  // a re-delivered invite of an ended call
    calls[uuid] = Call(
      uuid: uuid, callId: callId, handle: handle, displayName: displayName, video: video,
      progress: .incoming(.invited(pushed: false), .ringing(shown: false)),
      kind: group ? .group(Group()) : .oneToOne(remoteVideo: false))
    return [
      .reportIncoming(
        IncomingCallReport(
          uuid: uuid, callId: callId, handle: handle, displayName: displayName, hasVideo: video, origin: .invite,
          isGroup: group))
    ]
  }

  private mutating func resolved(_ callId: CallID, _ state: CallState?) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard let call = calls[uuid], call.direction == .incoming, case .oneToOne = call.kind else { return [] }
    guard let reason = Self.endReason(forPushedCall: state, ownDeviceId: deviceId) else {
      // Still ringing (its invite is on the way) or accepted here: resolved.
      return resolvedHere(uuid)
    }
    // An invite already seen means the call rang here; a stale "not found" must not end it.
    if state == nil && call.inviteReceived { return [] }
    return finish(uuid, reason: reason)
  }

  private mutating func groupResolved(_ callId: CallID, _ state: GroupCallState?, userId: String?) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard let call = calls[uuid], call.isGroup, call.direction == .incoming else { return [] }
    guard let reason = Self.endReason(forPushedGroup: state, userId: userId, ownDeviceId: deviceId) else {
      // Without this user's member state nothing is known yet: the invite or the timer settles it.
      let known = state.map { group in userId.flatMap { group.member($0) } != nil } ?? false
      return known ? resolvedHere(uuid) : []
    }
    // An invite already seen means the call rang here; a stale "not found" must not end it.
    if state == nil && call.inviteReceived { return [] }
    // Answered here meanwhile: the user's join stands unless the call itself is over.
    if call.stage != .ringing && state?.state != .ended { return resolvedHere(uuid) }
    return finish(uuid, reason: reason)
  }

  private mutating func groupState(_ callId: CallID, _ state: GroupCall.State) -> [Effect] {
    let uuid = uuid(for: callId)
    guard let call = calls[uuid], call.isGroup else { return [] }
    switch state {
    case .ended(let reason?):
      return finish(uuid, reason: SystemCallEndReason(group: reason))
    case .ended(nil):
      // Ended here without the OS asking (performEnd forgets the call first): the join was
      // refused, or could not be sent.
      return finish(uuid, reason: .failed)
    case .joined:
      // An outgoing group call is joined: its media start connecting.
      guard call.progress == .outgoing(.placing) else { return [] }
      calls[uuid]?.progress = .outgoing(.connecting)
      return [.reportOutgoingStartedConnecting(uuid)]
    case .ringing, .joining:
      return []
    }
  }

  private mutating func groupMedia(_ callId: CallID, _ state: PeerConnectionState) -> [Effect] {
    let uuid = uuid(for: callId)
    guard let call = calls[uuid], call.isGroup else { return [] }
    guard case .incoming(let arrival, let answering) = call.progress else { return outgoingGroupMedia(call, state) }
    switch state {
    case .connected:
      // This device's media are up: the answer action is done.
      guard case .answering(let action) = answering else { return [] }
      calls[uuid]?.progress = .incoming(arrival, .connected)
      return [.cancel(.answer(uuid)), .fulfill(actionId: action)] + resolvedHere(uuid)
    case .failed:
      // Nothing restarts a group call's media: the call is over for this device.
      guard call.stage != .ringing else { return [] }
      return finish(uuid, reason: .failed) + [.leaveGroup(callId)]
    case .new, .checking, .disconnected, .closed:
      return []
    }
  }

  private mutating func groupLiveKit(_ callId: CallID, url: String, token: String) -> [Effect] {
    let uuid = uuid(for: callId)
    guard let call = calls[uuid], let group = call.group, call.stage != .ringing, !group.externalMedia else {
      return []
    }
    calls[uuid]?.changeGroup { $0.externalMedia = true }
    return [.connectGroupMedia(callId, url: url, token: token, video: call.video, muted: group.muted)]
  }

  private mutating func dial(_ callId: CallID, to userId: String, displayName: String?, video: Bool) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard calls[uuid] == nil else { return [] }
    calls[uuid] = Call(
      uuid: uuid, callId: callId, handle: userId, displayName: displayName, video: video,
      progress: .outgoing(.requested), kind: .oneToOne(remoteVideo: false))
    return [.request(.startCall(uuid: uuid, handle: userId, displayName: displayName, video: video))]
  }

  private mutating func startGroup(_ callId: CallID, _ start: GroupStart, video: Bool) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard calls[uuid] == nil else { return [] }
    let handle: String
    let displayName: String?
    switch start {
    case .create(let members, let title):
      handle = members.joined(separator: ", ")
      displayName = title.flatMap { $0.isEmpty ? nil : $0 }
    case .room(let room):
      handle = room
      displayName = room
    }
    calls[uuid] = Call(
      uuid: uuid, callId: callId, handle: handle, displayName: displayName, video: video,
      progress: .outgoing(.requested), kind: .group(Group(start: start)))
    return [.request(.startCall(uuid: uuid, handle: handle, displayName: displayName, video: video))]
  }

  private mutating func roomJoined(_ proposed: CallID, _ callId: CallID?) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: proposed)
    guard let call = calls[uuid] else {
      // Ended in the OS UI while the join was in flight: leave the room now.
      return callId.map { [.leaveGroup($0)] } ?? []
    }
    guard call.awaitingRoom else { return [] }
    guard let callId else { return finish(uuid, reason: .failed) }
    calls[uuid]?.changeGroup { $0.awaitingRoom = false }
    if callId != proposed {
      aliases[callId] = uuid
      calls[uuid]?.callId = callId
    }
    return []
  }

  private mutating func groupParticipants(_ callId: CallID, _ state: GroupCallState) -> [Effect] {
    let uuid = uuid(for: callId)
    guard let group = calls[uuid]?.group, !group.othersJoined else { return [] }
    let othersJoined = state.members.contains { member in
      member.userId != state.creatorId && (member.state == .joined || member.state == .left)
    }
    calls[uuid]?.changeGroup { $0.othersJoined = othersJoined }
    return []
  }

  /// This device's media in a group call it started: connected is reported to the OS (after
  /// "started connecting", if the join did not report it); failed for good ends the call.
  private mutating func outgoingGroupMedia(_ call: Call, _ state: PeerConnectionState) -> [Effect] {
    guard case .outgoing(let placing) = call.progress else { return [] }
    switch state {
    case .connected:
      guard placing == .placing || placing == .connecting else { return [] }
      calls[call.uuid]?.progress = .outgoing(.connected)
      return (placing == .placing ? [.reportOutgoingStartedConnecting(call.uuid)] : [])
        + [.reportOutgoingConnected(call.uuid)]
    case .new, .checking:
      guard placing == .placing else { return [] }
      calls[call.uuid]?.progress = .outgoing(.connecting)
      return [.reportOutgoingStartedConnecting(call.uuid)]
    case .failed:
      guard call.shown else { return [] }
      return finish(call.uuid, reason: .failed) + [.leaveGroup(call.callId)]
    case .disconnected, .closed:
      return []
    }
  }

  private mutating func engine(_ callId: CallID, _ state: CallEngine.State) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard let call = calls[uuid], case .oneToOne = call.kind else { return [] }
    switch state {
    case .calling:
      guard call.progress == .outgoing(.placing) else { return [] }
      calls[uuid]?.progress = .outgoing(.connecting)
      return [.reportOutgoingStartedConnecting(uuid)]
    case .connected:
      var effects: [Effect] = []
      switch call.progress {
      case .incoming(_, .connected), .outgoing(.connected):
        return []
      case .incoming(let arrival, .answering(let action)):
        calls[uuid]?.progress = .incoming(arrival, .connected)
        effects = [.cancel(.answer(uuid)), .fulfill(actionId: action)] + resolvedHere(uuid)
      case .incoming(let arrival, .ringing):
        calls[uuid]?.progress = .incoming(arrival, .connected)
        effects = resolvedHere(uuid)
      case .outgoing(.requested), .outgoing(.placing), .outgoing(.connecting):
        calls[uuid]?.progress = .outgoing(.connected)
        effects = [.reportOutgoingConnected(uuid)]
      }
      return effects
    case .ended(let ending):
      let reason: SystemCallEndReason
      switch ending {
      case .remote(let signaled):
        reason =
          call.direction == .outgoing
          ? SystemCallEndReason(signaledToCaller: signaled) : SystemCallEndReason(signaled: signaled)
      case .glare: reason = .remoteEnded
      // Ended here without the OS asking (performEnd forgets the call first): signaling stopped
      // for good, ICE could not recover, or a local error.
      case .local, .iceFailed, .error: reason = .failed
      }
      return finish(uuid, reason: reason)
    case .idle, .ringing, .incoming, .connecting, .reconnecting:
      return []
    }
  }

  private mutating func glare(survivor: CallID) -> [Effect] {
    // The replaced call ends through its engine's `.ended(.glare)`. The survivor is answered
    // through the OS, so its UI stays in step, once the OS shows it.
    if let call = self.call(survivor), call.shown, call.direction == .incoming {
      return [.request(.answer(uuid: call.uuid))]
    }
    glareSurvivors.insert(survivor)
    return []
  }

  private mutating func perform(_ action: SystemCallAction) -> [Effect] {
    let uuid = action.callUUID
    guard var call = calls[uuid] else {
      // An end for a call already gone is done; anything else cannot be.
      return action.kind == .end ? [.fulfill(actionId: action.id)] : [.fail(actionId: action.id)]
    }
    switch action.kind {
    case .startCall:
      guard call.progress == .outgoing(.requested) else { return [.fail(actionId: action.id)] }
      call.progress = .outgoing(.placing)
      call.cameraOn = call.video
      let start: Effect
      switch call.kind {
      case .oneToOne:
        start = .dial(call.callId, to: call.handle, video: call.video)
      case .group(var group):
        switch group.start {
        case .create(let members, let title)?:
          start = .createGroup(call.callId, members: members, title: title, video: call.video)
        case .room(let room)?:
          group.awaitingRoom = true
          call.kind = .group(group)
          start = .joinRoom(call.callId, room: room, video: call.video)
        case nil:
          return [.fail(actionId: action.id)]  // a ring is never started here
        }
      }
      calls[uuid] = call
      return [.prepareAudio(video: call.video), start] + cameraStarted(call) + [.fulfill(actionId: action.id)]
    case .answer:
      guard case .incoming(let arrival, let answering) = call.progress else { return [.fail(actionId: action.id)] }
      switch answering {
      case .connected: return [.fulfill(actionId: action.id)]
      case .answering: return [.fail(actionId: action.id)]
      case .ringing: break
      }
      call.progress = .incoming(arrival, .answering(action: action.id))
      call.cameraOn = call.video
      calls[uuid] = call
      let answer: Effect
      switch call.kind {
      case .oneToOne: answer = .answer(call.callId)
      case .group: answer = .joinGroup(call.callId, video: call.video)
      }
      return [.prepareAudio(video: call.video), answer] + cameraStarted(call)
        + [.arm(.answer(uuid), at: action.timeoutDate)]
    case .end:
      // Ringing group calls are declined, joined ones left, ones created here and not joined by
      // anyone else cancelled (endOverSignaling reads the stage).
      return finish(uuid, reason: nil) + endOverSignaling(call, .user) + [.fulfill(actionId: action.id)]
    case .setMuted(let muted):
      switch call.kind {
      case .oneToOne:
        return [.setMuted(call.callId, muted), .fulfill(actionId: action.id)]
      case .group:
        calls[uuid]?.changeGroup { $0.muted = muted }
        return [.setGroupMuted(call.callId, muted), .fulfill(actionId: action.id)]
      }
    case .setHeld(let held):
      switch call.kind {
      case .oneToOne: return [.setHeld(call.callId, held), .fulfill(actionId: action.id)]
      case .group: return [.fail(actionId: action.id)]  // it goes on for the others: reports say it cannot be held
      }
    case .playDTMF:
      // Dialtone calls are app to app: reports say DTMF is not supported.
      return [.fail(actionId: action.id)]
    }
  }

  private mutating func videoToggled(_ callId: CallID, enabled: Bool) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    // A group call's video is fixed when it starts.
    guard var call = calls[uuid], call.shown, case .oneToOne = call.kind else { return [] }
    // Before an incoming call is answered the camera stays off whatever the toggle says.
    let live = call.stage != .ringing
    let wasOn = call.cameraOn
    let wasVideo = call.hasVideo
    call.video = enabled
    call.cameraOn = enabled && live
    calls[uuid] = call
    var effects: [Effect] = [.setVideo(callId, enabled), .reportUpdated(uuid, hasVideo: call.hasVideo)]
    // An audio call turning into a video call: the audio session follows (`.videoChat`).
    if call.hasVideo && !wasVideo && live { effects.append(.prepareAudio(video: true)) }
    if call.cameraOn && !wasOn { effects += cameraStarted(call) }
    if !call.cameraOn && wasOn && applicationActive && !calls.values.contains(where: \.cameraOn) {
      effects.append(.stopCamera)
    }
    return effects
  }

  /// The other side's video: the OS shows a video call while either side sends video.
  private mutating func remoteVideo(_ callId: CallID, sends: Bool) -> [Effect] {
    let uuid = CallUUIDs.uuid(for: callId)
    guard var call = calls[uuid], call.shown, case .oneToOne(let remoteVideo) = call.kind, remoteVideo != sends else {
      return []
    }
    let wasVideo = call.hasVideo
    call.kind = .oneToOne(remoteVideo: sends)
    calls[uuid] = call
    guard call.hasVideo != wasVideo else { return [] }
    let live = call.stage != .ringing
    return [.reportUpdated(uuid, hasVideo: call.hasVideo)] + (call.hasVideo && live ? [.prepareAudio(video: true)] : [])
  }

  /// A call's camera is wanted from now on: it starts if the app is active, else it waits,
  /// paused (a 1:1 call's peer is told).
  private func cameraStarted(_ call: Call) -> [Effect] {
    guard call.cameraOn else { return [] }
    if applicationActive { return [.startCamera] }
    switch call.kind {
    case .oneToOne: return [.cameraPaused(call.callId, true)]
    case .group: return []
    }
  }

  /// The camera follows the app: it starts when the app becomes active (the calls that waited
  /// for it resume) and stops when the app goes to the background (they pause).
  private mutating func applicationActiveChanged(_ active: Bool) -> [Effect] {
    guard active != applicationActive else { return [] }
    applicationActive = active
    let filming = activeCalls.filter(\.cameraOn)
    guard !filming.isEmpty else { return [] }
    return [active ? .startCamera : .stopCamera]
      + filming.filter { !$0.isGroup }.map { .cameraPaused($0.callId, !active) }
  }

  /// The answer action reached its `timeoutDate` (or the OS said it timed out): it is never
  /// settled now; the call ends here and over signaling.
  private mutating func answerTimedOut(actionId: UUID) -> [Effect] {
    guard let call = calls.values.first(where: { $0.answerAction == actionId }) else { return [] }
    return [.cancel(.answer(call.uuid))] + finish(call.uuid, reason: .failed, settlingAnswer: false)
      + endOverSignaling(call, .answerTimedOut)
  }

  private mutating func transactionFailed(_ transaction: SystemCallTransaction) -> [Effect] {
    guard let call = calls[transaction.uuid] else { return [] }
    switch transaction {
    case .startCall:
      // The OS refused the outgoing call: it never existed.
      return finish(call.uuid, reason: nil)
    case .end:
      // The OS does not know the call (any more): end it over signaling all the same.
      return finish(call.uuid, reason: nil) + endOverSignaling(call, .user)
    case .answer, .setMuted, .setHeld:
      return []
    }
  }

  /// Ends every call: reported with `reason` (nil: the OS already knows), and over signaling
  /// with `cause` (nil: signaling is gone).
  private mutating func endAll(reason: SystemCallEndReason?, cause: LocalEndCause?) -> [Effect] {
    var effects: [Effect] = []
    for call in activeCalls {
      effects += finish(call.uuid, reason: reason)
      if let cause { effects += endOverSignaling(call, cause) }
    }
    glareSurvivors.removeAll()
    return effects
  }

  /// Forgets a call: fails its pending answer action (unless it timed out: then it is never
  /// settled), cancels its timers, turns its camera off, remembers how it ended, and reports the
  /// ending when `reason` is given.
  private mutating func finish(_ uuid: UUID, reason: SystemCallEndReason?, settlingAnswer: Bool = true) -> [Effect] {
    guard let call = calls.removeValue(forKey: uuid) else { return [] }
    aliases = aliases.filter { $0.value != uuid }
    var effects: [Effect] = []
    if settlingAnswer, let action = call.answerAction { effects += [.cancel(.answer(uuid)), .fail(actionId: action)] }
    if call.awaitingResolution { effects.append(.cancel(.pushResolution(uuid))) }
    if call.cameraOn && applicationActive && !calls.values.contains(where: \.cameraOn) { effects.append(.stopCamera) }
    if call.externalMedia { effects.append(.disconnectGroupMedia(call.callId)) }
    if let reason, call.shown { effects.append(.reportEnded(uuid, reason)) }
    remember(call.callId, reason ?? .remoteEnded)
    return effects
  }

  /// How a call the OS is done with ends over signaling: a 1:1 call is cancelled, declined or
  /// hung up as its engine's state says; a group ring is declined, a joined (or joining) group
  /// call left, one created here that nobody else joined yet cancelled; a room whose join is in
  /// flight is left once the join is answered (`roomJoined`); one never started, nothing.
  private func endOverSignaling(_ call: Call, _ cause: LocalEndCause) -> [Effect] {
    switch (call.kind, call.progress) {
    case (.oneToOne, _):
      return [.end(call.callId, cause)]
    case (.group(let group), .outgoing(let placing)):
      guard placing != .requested, !group.awaitingRoom else { return [] }
      if case .create? = group.start, !group.othersJoined { return [.endGroupForAll(call.callId)] }
      return [.leaveGroup(call.callId)]
    case (.group, .incoming(_, .ringing)):
      return [.declineGroup(call.callId)]
    case (.group, .incoming(_, .answering)), (.group, .incoming(_, .connected)):
      return [.leaveGroup(call.callId)]
    }
  }

  /// A pushed call's outcome is known here (invite, `get-call`, connected): its timer stops.
  private mutating func resolvedHere(_ uuid: UUID) -> [Effect] {
    guard calls[uuid]?.awaitingResolution == true else { return [] }
    calls[uuid]?.resolved()
    return [.cancel(.pushResolution(uuid))]
  }

  private mutating func remember(_ callId: CallID, _ reason: SystemCallEndReason) {
    if ledger.ended.updateValue(reason, forKey: callId) == nil { endedOrder.append(callId) }
    while endedOrder.count > Self.endedMemory { ledger.ended[endedOrder.removeFirst()] = nil }
  }
}
