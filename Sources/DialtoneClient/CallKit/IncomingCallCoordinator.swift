import DialtoneProtocol
import Foundation

/// Applies the OS call-UI rules (CallKit/PushKit on iOS) to Dialtone calls.
///
/// - Every VoIP push is reported to the OS before anything touches the network; only then is
///   signaling asked to connect. A malformed push is still reported (random UUID, handle
///   "Unknown") and ended at once as `.failed`.
/// - After connecting, the `get-call` answer for the pushed call (`resolvePushedCall`) ends the
///   OS call with the reason of protocol.md section 9 when the call is no longer ringing.
/// - The OS answer action completes (`performAnswer` returns true) only once the call is
///   connected (`callConnected`); it fails after `answerTimeout`.
/// - Audio starts only when the OS activates the audio session (`didActivateAudioSession`).
/// - A provider reset ends every call.
/// - Server call ids map to stable UUIDs (`CallUUIDs`) and back.
///
/// An app's `CXProviderDelegate` forwards each action and fulfils it with the returned Bool:
/// `Task { await coordinator.performAnswer(uuid: action.callUUID) ? action.fulfill() : action.fail() }`.
public actor IncomingCallCoordinator {
  /// A decoded VoIP push.
  public enum VoIPPush: Sendable, Equatable {
    case incoming(IncomingCallPush)
    case malformed(reason: String)
  }

  public enum Direction: String, Sendable, Equatable {
    case incoming
    case outgoing
  }

  public enum Stage: String, Sendable, Equatable {
    /// Incoming, reported to the OS, not answered yet.
    case ringing
    /// Incoming, answered in the OS UI, waiting to connect.
    case answering
    /// Outgoing, not connected yet.
    case dialing
    /// Media connected.
    case connected
  }

  /// A call the OS knows about.
  public struct CallInfo: Sendable, Equatable {
    public var uuid: UUID
    public var callId: CallID
    public var direction: Direction
    public var stage: Stage
    /// Announced by a VoIP push (its outcome comes from `resolvePushedCall` or an `invite`).
    public var pushed: Bool
    /// The `invite` for it arrived over signaling.
    public var inviteReceived: Bool
  }

  /// The handle shown for a malformed push.
  public static let unknownHandle = "Unknown"

  public let deviceId: String
  public let answerTimeout: Double
  /// How long a pushed call may wait for its `invite` or its `get-call` answer before it
  /// ends as `.failed` (the "no answer / no connection" row of protocol.md section 9).
  public let pushResolutionTimeout: Double
  private let ui: any SystemCallUI
  private let signaling: any CallSignalingActions
  private let clock: any ClientClock

  private var calls: [UUID: CallInfo] = [:]
  private var answerWaiters: [UUID: CheckedContinuation<Bool, Never>] = [:]
  private var answerTimers: [UUID: Task<Void, Never>] = [:]
  private var pushTimers: [UUID: Task<Void, Never>] = [:]
  /// True between the OS's `didActivate` and `didDeactivate` of the audio session.
  public private(set) var audioActive = false

  /// - Parameters:
  ///   - deviceId: this device's id (to tell "accepted here" from "accepted elsewhere").
  ///   - answerTimeout: how long an answered call may take to connect before the answer fails.
  ///   - pushResolutionTimeout: how long a pushed call waits for its invite or `get-call` answer.
  public init(
    deviceId: String, ui: any SystemCallUI, signaling: any CallSignalingActions,
    clock: any ClientClock = SystemClientClock(), answerTimeout: Double = 10, pushResolutionTimeout: Double = 30
  ) {
    self.pushResolutionTimeout = pushResolutionTimeout
    self.deviceId = deviceId
    self.ui = ui
    self.signaling = signaling
    self.clock = clock
    self.answerTimeout = answerTimeout
  }

  deinit {
    for timer in answerTimers.values { timer.cancel() }
    for timer in pushTimers.values { timer.cancel() }
  }

  // MARK: Ids

  /// The OS UUID of a server call id (stable: the same on every call and device).
  public nonisolated static func uuid(for callId: CallID) -> UUID {
    CallUUIDs.uuid(for: callId)
  }

  /// The server call id of a call the OS knows by `uuid`.
  public func callId(for uuid: UUID) -> CallID? {
    calls[uuid]?.callId
  }

  public func call(_ callId: CallID) -> CallInfo? {
    calls[Self.uuid(for: callId)]
  }

  public var activeCalls: [CallInfo] {
    calls.values.sorted { $0.callId < $1.callId }
  }

  // MARK: VoIP pushes

  /// Decodes a PushKit `dictionaryPayload` (or FCM data map). Synchronous, no network.
  public nonisolated static func decode(payload: [AnyHashable: Any]) -> VoIPPush {
    do {
      return .incoming(try IncomingCallPush(payload: payload))
    } catch {
      return .malformed(reason: "\(error)")
    }
  }

  /// Handles a VoIP push: reports it to the OS first, then asks signaling to connect.
  /// Returns the UUID reported to the OS. Call it from PushKit's delegate and call its
  /// completion handler when this returns.
  public nonisolated func handleVoIPPush(payload: [AnyHashable: Any]) async -> UUID {
    let push = Self.decode(payload: payload)
    return await handleVoIPPush(push)
  }

  public func handleVoIPPush(_ push: VoIPPush) async -> UUID {
    switch push {
    case .malformed:
      let uuid = UUID()
      try? await ui.reportIncomingCall(uuid: uuid, handle: Self.unknownHandle, displayName: nil, hasVideo: false)
      await ui.reportCallEnded(uuid: uuid, reason: .failed)
      return uuid

    case .incoming(let payload):
      let uuid = Self.uuid(for: payload.callId)
      let known = calls[uuid] != nil
      if !known {
        calls[uuid] = CallInfo(
          uuid: uuid, callId: payload.callId, direction: .incoming, stage: .ringing, pushed: true,
          inviteReceived: false)
      }
      do {
        try await ui.reportIncomingCall(
          uuid: uuid, handle: payload.callerHandle, displayName: payload.callerName, hasVideo: payload.hasVideo)
      } catch {
        // A repeated push for a call the OS already shows fails as a duplicate: keep it.
        if !known {
          calls[uuid] = nil
          return uuid
        }
      }
      if !known && calls[uuid] != nil { startPushTimer(uuid) }
      await signaling.connectForPushedCall(payload.callId)
      return uuid
    }
  }

  /// How a device woken by a push ends its OS call, from the `get-call` result for the pushed
  /// call (protocol.md section 9): nil while the call still rings or was accepted by this
  /// device; `state` nil means `not-found`, no answer or no connection.
  public nonisolated static func endReason(forPushedCall state: CallState?, ownDeviceId: String) -> SystemCallEndReason? {
    guard let state else { return .failed }
    if state.state != .ringing, let callee = state.calleeDeviceId, callee != ownDeviceId {
      return .answeredElsewhere
    }
    switch state.state {
    case .ringing, .accepted:
      // Accepted by this device (another device's accept is handled above; an accepted call
      // without a callee device cannot be ours).
      if state.state == .accepted && state.calleeDeviceId == nil { return .answeredElsewhere }
      return nil
    case .ended:
      switch state.endReason {
      case .declined?, .busy?, .declinedElsewhere?: return .declinedElsewhere
      case .missed?: return .unanswered
      case .answeredElsewhere?: return .answeredElsewhere
      default: return .remoteEnded
      }
    }
  }

  /// The `get-call` result for a pushed call (nil: `not-found`, no answer, no connection).
  /// Ends the OS call when the call is no longer ringing for this device.
  public func resolvePushedCall(callId: CallID, state: CallState?) async {
    let uuid = Self.uuid(for: callId)
    guard let call = calls[uuid], call.direction == .incoming else { return }
    guard let reason = Self.endReason(forPushedCall: state, ownDeviceId: deviceId) else {
      // Still ringing (its invite is on the way) or accepted here: resolved.
      pushTimers.removeValue(forKey: uuid)?.cancel()
      return
    }
    // An invite already seen means the call rang here; a stale "not found" must not kill it.
    if state == nil && call.inviteReceived { return }
    finish(uuid, answered: false)
    await ui.reportCallEnded(uuid: uuid, reason: reason)
  }

  // MARK: Signaling events

  /// An `invite` arrived over signaling. Reports it to the OS unless a push already did.
  /// Returns the call's UUID, or nil when the OS refused it (then signaling is asked to end it).
  @discardableResult
  public func incomingInvite(callId: CallID, handle: String, displayName: String?, hasVideo: Bool) async -> UUID? {
    let uuid = Self.uuid(for: callId)
    if var call = calls[uuid] {
      call.inviteReceived = true
      calls[uuid] = call
      pushTimers.removeValue(forKey: uuid)?.cancel()
      return uuid
    }
    calls[uuid] = CallInfo(
      uuid: uuid, callId: callId, direction: .incoming, stage: .ringing, pushed: false, inviteReceived: true)
    do {
      try await ui.reportIncomingCall(uuid: uuid, handle: handle, displayName: displayName, hasVideo: hasVideo)
      return uuid
    } catch {
      if calls[uuid] != nil {
        finish(uuid, answered: false)
        await signaling.end(callId, cause: .systemRejected)
      }
      return nil
    }
  }

  /// Registers an outgoing call before the app requests the OS start-call transaction with the
  /// returned UUID.
  public func startOutgoingCall(callId: CallID) -> UUID {
    let uuid = Self.uuid(for: callId)
    if calls[uuid] == nil {
      calls[uuid] = CallInfo(
        uuid: uuid, callId: callId, direction: .outgoing, stage: .dialing, pushed: false, inviteReceived: false)
    }
    return uuid
  }

  /// The outgoing call's `invite` was sent.
  public func outgoingCallStartedConnecting(callId: CallID) async {
    let uuid = Self.uuid(for: callId)
    guard let call = calls[uuid], call.direction == .outgoing else { return }
    await ui.reportOutgoingCallStartedConnecting(uuid: uuid)
  }

  /// Media connected. Completes a pending answer action; reports an outgoing call connected.
  public func callConnected(callId: CallID) async {
    let uuid = Self.uuid(for: callId)
    guard var call = calls[uuid], call.stage != .connected else { return }
    let wasDialing = call.stage == .dialing
    call.stage = .connected
    calls[uuid] = call
    answerTimers.removeValue(forKey: uuid)?.cancel()
    pushTimers.removeValue(forKey: uuid)?.cancel()
    answerWaiters.removeValue(forKey: uuid)?.resume(returning: true)
    if wasDialing { await ui.reportOutgoingCallConnected(uuid: uuid) }
  }

  /// A `call-ended` arrived over signaling (unknown calls are ignored).
  public func remoteEnded(callId: CallID, reason: EndReason) async {
    let uuid = Self.uuid(for: callId)
    guard let call = calls[uuid] else { return }
    let systemReason: SystemCallEndReason
    if call.direction == .outgoing {
      switch reason {
      case .missed: systemReason = .unanswered
      case .failed, .connectionLost: systemReason = .failed
      default: systemReason = .remoteEnded
      }
    } else {
      systemReason = SystemCallEndReason(signaled: reason)
    }
    finish(uuid, answered: false)
    await ui.reportCallEnded(uuid: uuid, reason: systemReason)
  }

  // MARK: Actions from the OS

  /// The OS start-call action for a call registered with `startOutgoingCall`.
  public func performStartCall(uuid: UUID) -> Bool {
    calls[uuid]?.direction == .outgoing
  }

  /// The OS answer action. Returns true (fulfil) once the call is connected, false (fail)
  /// when it ends first or does not connect within `answerTimeout`.
  public func performAnswer(uuid: UUID) async -> Bool {
    guard var call = calls[uuid], call.direction == .incoming else { return false }
    switch call.stage {
    case .connected: return true
    case .answering, .dialing: return false
    case .ringing: break
    }
    call.stage = .answering
    calls[uuid] = call
    await signaling.answer(call.callId)
    guard let now = calls[uuid] else { return false }
    if now.stage == .connected { return true }
    let timeout = answerTimeout
    return await withCheckedContinuation { continuation in
      answerWaiters[uuid] = continuation
      answerTimers[uuid] = Task { [weak self, clock] in
        do { try await clock.sleep(for: timeout) } catch { return }
        await self?.answerTimedOut(uuid)
      }
    }
  }

  private func startPushTimer(_ uuid: UUID) {
    let timeout = pushResolutionTimeout
    pushTimers[uuid] = Task { [weak self, clock] in
      do { try await clock.sleep(for: timeout) } catch { return }
      await self?.pushTimedOut(uuid)
    }
  }

  private func pushTimedOut(_ uuid: UUID) async {
    guard pushTimers.removeValue(forKey: uuid) != nil, let call = calls[uuid], !call.inviteReceived,
      call.stage != .connected
    else { return }
    finish(uuid, answered: false)
    await ui.reportCallEnded(uuid: uuid, reason: .failed)
  }

  private func answerTimedOut(_ uuid: UUID) async {
    guard let call = calls[uuid], call.stage == .answering, answerWaiters[uuid] != nil else { return }
    finish(uuid, answered: false)
    await ui.reportCallEnded(uuid: uuid, reason: .failed)
    await signaling.end(call.callId, cause: .answerTimedOut)
  }

  /// The OS end action (the user declined or hung up). Always fulfilled.
  @discardableResult
  public func performEnd(uuid: UUID) async -> Bool {
    guard let call = calls[uuid] else { return true }
    finish(uuid, answered: false)
    await signaling.end(call.callId, cause: .user)
    return true
  }

  public func performSetMuted(uuid: UUID, muted: Bool) async -> Bool {
    guard let call = calls[uuid] else { return false }
    await signaling.setMuted(call.callId, muted: muted)
    return true
  }

  public func performSetHeld(uuid: UUID, held: Bool) async -> Bool {
    guard let call = calls[uuid] else { return false }
    await signaling.setHeld(call.callId, held: held)
    return true
  }

  public func performPlayDTMF(uuid: UUID, digits: String) async -> Bool {
    guard let call = calls[uuid], !digits.isEmpty else { return false }
    await signaling.playDTMF(call.callId, digits: digits)
    return true
  }

  /// The OS activated the audio session (`provider(_:didActivate:)`): audio may start now.
  public func didActivateAudioSession() async {
    guard !audioActive else { return }
    audioActive = true
    await signaling.audioSessionActivated()
  }

  /// The OS deactivated the audio session (`provider(_:didDeactivate:)`).
  public func didDeactivateAudioSession() async {
    guard audioActive else { return }
    audioActive = false
    await signaling.audioSessionDeactivated()
  }

  /// The OS reset its provider (`providerDidReset`): every call ends.
  public func providerDidReset() async {
    let ended = calls.values.sorted { $0.callId < $1.callId }
    for call in ended { finish(call.uuid, answered: false) }
    let hadAudio = audioActive
    audioActive = false
    for call in ended { await signaling.end(call.callId, cause: .providerReset) }
    if hadAudio { await signaling.audioSessionDeactivated() }
  }

  // MARK: Helpers

  /// Forgets a call and completes its pending answer action.
  private func finish(_ uuid: UUID, answered: Bool) {
    calls[uuid] = nil
    answerTimers.removeValue(forKey: uuid)?.cancel()
    pushTimers.removeValue(forKey: uuid)?.cancel()
    answerWaiters.removeValue(forKey: uuid)?.resume(returning: answered)
  }
}
