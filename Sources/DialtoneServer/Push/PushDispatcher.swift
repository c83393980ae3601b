import DialtoneCalls
import DialtoneProtocol
import DialtonePush
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Makes phones ring: on every ringing call, each of the callee's installations without a live
/// socket gets an incoming-call push from the provider of each of its tokens (APNs VoIP for
/// iOS, a high-priority FCM message for Android). A missed call gets the missed-call
/// notification on the tokens meant for it (APNs alert). Cancel, decline and answered-elsewhere never push: devices learn those
/// over signaling. Work runs in tasks, so signaling never waits for APNs or FCM.
final class PushDispatcher: CallEffectSink, Sendable {
  struct RetryPolicy: Sendable {
    var firstDelay: Double = 0.5
    var maxDelay: Double = 4
    var maxAttempts = 6
  }

  private let store: any DeviceStore
  /// Which provider delivers each token kind, and for what.
  private let routes: [PushTokenKind: (provider: any PushProvider, purpose: PushPurpose)]
  private let retry: RetryPolicy
  private let log: Log
  /// Rings still going (a 1:1 call by its id, a group member by `ringKey`), with the caller's
  /// display name (for a missed-call notification).
  private let ringingCalls = Locked<[String: String?]>([:])
  private let inFlight = TaskTracker()
  private let observations: Observations?
  /// Lets go of the providers' connections and threads (`stop`).
  private let closeTransports: @Sendable () -> Void

  init(
    store: any DeviceStore, providers: [any PushProvider], retry: RetryPolicy = RetryPolicy(),
    observations: Observations? = nil, log: Log, closeTransports: @escaping @Sendable () -> Void = {}
  ) {
    self.observations = observations
    self.closeTransports = closeTransports
    var routes: [PushTokenKind: (provider: any PushProvider, purpose: PushPurpose)] = [:]
    for provider in providers {
      for (kind, purpose) in provider.purposes { routes[kind] = (provider, purpose) }
    }
    self.store = store
    self.routes = routes
    self.retry = retry
    self.log = log
  }

  func handle(_ event: CallEvent, connectedDevices: Set<String>) {
    switch event {
    case .ringing(let callId, let caller, let calleeId, let video, let createdAt):
      ringingCalls.withLock { _ = $0.updateValue(caller.name, forKey: callId) }
      let push = IncomingCallPush(
        callId: callId, callerId: caller.userId, callerDeviceId: caller.deviceId,
        callerName: caller.name, callerHandle: caller.userId, hasVideo: video,
        createdAt: createdAt.millisecondsSince1970)
      inFlight.start { await self.push(.incomingCall(push), to: calleeId, skipping: connectedDevices, ringKey: callId) }
    case .ended(let record):
      let callerName = ringingCalls.withLock { $0.removeValue(forKey: record.callId) } ?? nil
      if record.endReason == .missed {
        let push = MissedCallPush(callId: record.callId, callerId: record.callerId, callerName: callerName)
        inFlight.start { await self.push(.missedCall(push), to: record.calleeId, skipping: [], ringKey: nil) }
      }
    case .groupRinging(let ring):
      let key = Self.ringKey(ring.callId, ring.memberId)
      ringingCalls.withLock { _ = $0.updateValue(ring.creator.name, forKey: key) }
      let push = IncomingCallPush(
        callId: ring.callId, callerId: ring.creator.userId, callerDeviceId: ring.creator.deviceId,
        callerName: ring.creator.name, callerHandle: ring.creator.userId, hasVideo: ring.video,
        createdAt: ring.createdAt.millisecondsSince1970, memberCount: Int64(ring.memberCount), title: ring.title)
      inFlight.start {
        await self.push(.incomingCall(push), to: ring.memberId, skipping: connectedDevices, ringKey: key)
      }
    case .groupRingStopped(let callId, let memberId):
      ringingCalls.withLock { _ = $0.removeValue(forKey: Self.ringKey(callId, memberId)) }
    case .groupEnded:
      break
    }
  }

  /// Waits for every push started so far (tests).
  func drain() async { await inFlight.waitForAll() }

  /// The server is stopping: the pushes started so far finish (or fail), then the HTTP clients
  /// close their connections and end their threads. Nothing is pushed after.
  func stop() async {
    await drain()
    closeTransports()
  }

  private func isRinging(_ key: String) -> Bool { ringingCalls.withLock { $0[key] != nil } }

  /// A group call rings each member on its own: its rings are kept per member. "/" never
  /// appears in a call id, so the keys cannot meet a 1:1 call's.
  private static func ringKey(_ callId: CallID, _ memberId: String) -> String { callId + "/" + memberId }

  /// Sends `message` to every token of the user's installations (except connected devices)
  /// whose provider delivers that kind of message, all at once. `ringKey`: the ring a push is
  /// for, whose retries stop when it stops ringing.
  private func push(_ message: PushMessage, to userId: String, skipping connected: Set<String>, ringKey: String?) async
  {
    let devices: [StoredDevice]
    do { devices = try await store.devices(of: userId) } catch {
      log.error("push: cannot read devices of \(userId): \(error)")
      return
    }
    await withTaskGroup(of: Void.self) { group in
      for device in devices where !connected.contains(device.deviceId) {
        for token in device.tokens {
          guard let route = routes[token.kind], route.purpose == message.purpose else { continue }
          group.addTask {
            await self.deliver(token: token, ringKey: ringKey) { await route.provider.send(message, to: token) }
          }
        }
      }
    }
  }

  /// Sends with exponential backoff; a call push is retried only while its call still rings.
  private func deliver(token: PushToken, ringKey: String?, _ attempt: () async -> PushOutcome) async {
    let kind = token.kind
    var delay = retry.firstDelay
    for number in 1...retry.maxAttempts {
      if let ringKey, !isRinging(ringKey) { return }
      let outcome = await attempt()
      observations?.pushAttempted(kind: kind, outcome: outcome)
      switch outcome {
      case .delivered:
        log.debug("push \(kind) delivered (attempt \(number))")
        return
      case .invalidToken(let reason):
        log.info("push \(kind): token rejected (\(reason)); removing it")
        do {
          try await store.removeToken(token.token, kind: kind)
          observations?.pushTokenRemoved(kind: kind)
        } catch {
          log.error("push: cannot remove token: \(error)")
        }
        return
      case .failed(let reason):
        log.error("push \(kind) failed: \(reason)")
        return
      case .retryable(let reason):
        log.warning("push \(kind) attempt \(number) failed (\(reason)); retrying in \(delay) s")
        try? await Task.sleep(for: .seconds(delay))
        delay = min(delay * 2, retry.maxDelay)
      }
    }
    log.error("push \(kind): giving up after \(retry.maxAttempts) attempts")
  }
}
