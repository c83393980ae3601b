import DialtoneProtocol
import Foundation

/// Makes phones ring: on every ringing call, each of the callee's installations without a live
/// socket gets a VoIP push (iOS) or a high-priority FCM message (Android). A missed call gets an
/// ordinary alert push. Cancel, decline and answered-elsewhere never push: devices learn those
/// over signaling. Work runs in tasks, so signaling never waits for APNs or FCM.
final class PushDispatcher: CallEffectSink, @unchecked Sendable {
  // @unchecked: `ringingCalls` is only touched under `lock`.
  struct RetryPolicy: Sendable {
    var firstDelay: Double = 0.5
    var maxDelay: Double = 4
    var maxAttempts = 6
  }

  private let store: any DeviceStore
  private let apns: APNsClient?
  private let fcm: FCMClient?
  private let retry: RetryPolicy
  private let log: Log
  private let lock = NSLock()
  /// Calls still ringing, with the caller's display name (for a missed-call notification).
  private var ringingCalls: [CallID: String?] = [:]
  private let inFlight = PushTracker()

  init(store: any DeviceStore, apns: APNsClient?, fcm: FCMClient?, retry: RetryPolicy = RetryPolicy(), log: Log) {
    self.store = store; self.apns = apns; self.fcm = fcm; self.retry = retry; self.log = log
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    switch event {
    case .ringing(let callId, let caller, let calleeId, let video, let createdAt):
      lock.withLock { _ = ringingCalls.updateValue(caller.name, forKey: callId) }
      let push = IncomingCallPush(callId: callId, callerId: caller.userId, callerDeviceId: caller.deviceId,
                                  callerName: caller.name, callerHandle: caller.userId, hasVideo: video,
                                  createdAt: createdAt.millisecondsSince1970)
      inFlight.start { await self.ring(push, calleeId: calleeId, skipping: connectedDevices) }
    case .ended(let record):
      let callerName = lock.withLock { ringingCalls.removeValue(forKey: record.callId) } ?? nil
      if record.endReason == .missed {
        inFlight.start { await self.notifyMissed(record, callerName: callerName) }
      }
    }
  }

  /// Waits for every push started so far (tests, shutdown).
  func drain() async { await inFlight.waitForAll() }

  private func isRinging(_ callId: CallID) -> Bool { lock.withLock { ringingCalls[callId] != nil } }

  private func ring(_ push: IncomingCallPush, calleeId: String, skipping connected: Set<String>) async {
    let devices: [StoredDevice]
    do { devices = try await store.devices(of: calleeId) } catch {
      log.error("push: cannot read devices of \(calleeId): \(error)")
      return
    }
    await withTaskGroup(of: Void.self) { group in
      for device in devices where !connected.contains(device.deviceId) {
        let registration = device.registration
        if let apns, let token = registration.voipToken, let bundle = registration.bundleId {
          let request = APNsRequest(deviceToken: token, bundleID: bundle, environment: registration.apnsEnvironment ?? .production,
                                    pushType: .voip, payload: push.apnsPayload.serialized)
          group.addTask { await self.deliver(token: token, kind: .voip, callId: push.callId) { await apns.send(request) } }
        }
        if let fcm, let token = registration.fcmToken {
          let data = push.fcmData
          group.addTask { await self.deliver(token: token, kind: .fcm, callId: push.callId) { await fcm.send(token: token, data: data) } }
        }
      }
    }
  }

  private func notifyMissed(_ record: CallRecord, callerName: String?) async {
    guard let apns else { return }
    let devices = (try? await store.devices(of: record.calleeId)) ?? []
    let payload = MissedCallPush(callId: record.callId, callerId: record.callerId, callerName: callerName).apnsPayload.serialized
    for device in devices {
      guard let token = device.registration.alertToken, let bundle = device.registration.bundleId else { continue }
      let request = APNsRequest(deviceToken: token, bundleID: bundle, environment: device.registration.apnsEnvironment ?? .production,
                                pushType: .alert, payload: payload)
      await deliver(token: token, kind: .alert, callId: nil) { await apns.send(request) }
    }
  }

  /// Sends with exponential backoff; a call push is retried only while its call still rings.
  private func deliver(token: String, kind: PushTokenKind, callId: CallID?, _ attempt: () async -> PushOutcome) async {
    var delay = retry.firstDelay
    for number in 1...retry.maxAttempts {
      if let callId, !isRinging(callId) { return }
      switch await attempt() {
      case .delivered:
        log.debug("push \(kind.rawValue) delivered (attempt \(number))")
        return
      case .invalidToken(let reason):
        log.info("push \(kind.rawValue): token rejected (\(reason)); removing it")
        do { try await store.removeToken(token, kind: kind) } catch { log.error("push: cannot remove token: \(error)") }
        return
      case .failed(let reason):
        log.error("push \(kind.rawValue) failed: \(reason)")
        return
      case .retryable(let reason):
        log.warning("push \(kind.rawValue) attempt \(number) failed (\(reason)); retrying in \(delay) s")
        try? await Task.sleep(for: .seconds(delay))
        delay = min(delay * 2, retry.maxDelay)
      }
    }
    log.error("push \(kind.rawValue): giving up after \(retry.maxAttempts) attempts")
  }
}

/// Keeps the tasks a dispatcher started, so they can be awaited.
final class PushTracker: @unchecked Sendable {
  // @unchecked: `tasks` is only touched under `lock`.
  private let lock = NSLock()
  private var tasks: [UUID: Task<Void, Never>] = [:]

  func start(_ work: @escaping @Sendable () async -> Void) {
    let id = UUID()
    lock.withLock {
      tasks[id] = Task { [weak self] in
        await work()
        self?.finished(id)
      }
    }
  }

  private func finished(_ id: UUID) { lock.withLock { _ = tasks.removeValue(forKey: id) } }

  func waitForAll() async {
    while let task = lock.withLock({ tasks.values.first }) { await task.value }
  }
}
