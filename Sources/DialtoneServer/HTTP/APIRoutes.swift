import DialtoneNet
import DialtoneProtocol
import DialtoneStorage
import DialtoneSupport
import Foundation

/// The HTTP API: health, the caller's identity and live devices, ICE servers, call history.
struct APIRoutes {
  let hub: SignalingHub
  let authenticator: TokenAuthenticator
  let iceServers: IceServerIssuer
  let store: any ServerStore
  let clock: any DialtoneClock
  let version: String
  let observations: Observations
  var limits = ServerLimits()
  var directoryToken: String?
  var blockedCalls = BlockedCallsInHistory.hide

  func register(in router: inout Router) {
    router.add(.GET, "/healthz") { _ in .wire(HealthResponse(version: version)) }

    router.add(.GET, "/v1/me") { request in
      let identity = try authenticate(request)
      let live = await hub.liveDevices(of: identity.userId)
      return .wire(
        MeResponse(
          userId: identity.userId, deviceId: identity.deviceId, name: identity.name,
          devices: live.map { LiveDevice(deviceId: $0.deviceId, connectedAt: $0.connectedAt.millisecondsSince1970) }))
    }

    router.add(.GET, "/v1/ice-servers") { request in
      let identity = try authenticate(request)
      let servers = iceServers.servers(for: identity.userId, now: clock.now)
      observations.iceServersIssued(servers, source: "http")
      return .wire(IceServersResponse(iceServers: servers, ttl: iceServers.ttl))
    }

    router.add(.GET, "/v1/calls") { request in
      let identity = try authenticate(request)
      let page = try HistoryPage(request)
      let calls = try await store.history(
        of: identity.userId, limit: page.limit + 1, before: page.cursor, blocked: blockedCalls)
      let (shown, next) = page.split(calls) { HistoryCursor(createdAt: $0.createdAt, callId: $0.callId) }
      return .wire(CallHistoryResponse(calls: shown, next: next))
    }

    router.add(.GET, "/v1/calls/{callId}") { request in
      let identity = try authenticate(request)
      let callId = request.pathParameters["callId"] ?? ""
      let record: CallRecord
      if let stored = try await store.call(callId, visibleTo: identity.userId, blocked: blockedCalls) {
        record = stored
      } else if let live = await hub.callState(callId, for: identity) {
        record = CallRecord(live)
      } else {
        // The same answer for a call that does not exist and one of somebody else's.
        throw HTTPError.notFound("no call \(callId) of yours")
      }
      return .wire(CallDetailResponse(call: record, quality: try await store.qualityReports(of: callId)))
    }

    router.add(.GET, "/v1/group-calls") { request in
      let identity = try authenticate(request)
      let page = try HistoryPage(request)
      let calls = try await store.groupHistory(
        of: identity.userId, limit: page.limit + 1, before: page.cursor, blocked: blockedCalls)
      let (shown, next) = page.split(calls) { HistoryCursor(createdAt: $0.createdAt, callId: $0.callId) }
      return .wire(GroupCallHistoryResponse(calls: shown, next: next))
    }

    DeviceRoutes(
      authenticator: authenticator, store: store, clock: clock, maxPerUser: limits.maxPushRegistrationsPerUser
    ).register(in: &router)
    BlockRoutes(
      authenticator: authenticator, store: store, hub: hub, clock: clock, maxPerUser: limits.maxBlocksPerUser
    ).register(in: &router)
    DirectoryRoutes(
      authenticator: authenticator,
      backend: directoryToken.map { SharedSecretCredential(token: $0, realm: "dialtone backend") },
      store: store
    ).register(in: &router)
  }

  private func authenticate(_ request: HTTPRequest) throws(HTTPError) -> Identity {
    try authenticator.authenticate(request)
  }
}

/// `?limit=&before=` of a history route: one more record than the page is read, so that the
/// page knows whether a `next` cursor is owed.
struct HistoryPage {
  var limit = 50
  var cursor: HistoryCursor?

  init(_ request: HTTPRequest) throws(HTTPError) {
    if let text = request.query["limit"] {
      guard let parsed = Int(text), (1...200).contains(parsed) else { throw .badRequest("limit must be 1...200") }
      limit = parsed
    }
    if let text = request.query["before"] {
      guard let parsed = HistoryCursor(token: text) else { throw .badRequest("before is not a cursor from \"next\"") }
      cursor = parsed
    }
  }

  /// The page and the cursor of the next one, from `limit + 1` records.
  func split<Record>(_ records: [Record], cursor of: (Record) -> HistoryCursor) -> ([Record], String?) {
    let page = Array(records.prefix(limit))
    return (page, records.count > limit ? page.last.map { of($0).token } : nil)
  }
}

extension TokenAuthenticator {
  /// The caller of an HTTP API request, from its `Authorization: Bearer` token; 401 otherwise.
  func authenticate(_ request: HTTPRequest) throws(HTTPError) -> Identity {
    guard let token = request.bearerToken else { throw .unauthorized("an Authorization: Bearer token is required") }
    do {
      return try authenticate(token)
    } catch {
      throw .unauthorized(error.description)
    }
  }
}

extension HTTPResponse {
  static func wire(_ value: some WireCodable, status: Int = 200) -> HTTPResponse {
    HTTPResponse(status: status, body: MessageCodec.encode(value))
  }
}

extension CallRecord {
  /// A call still in the router (in progress, or ended before its record was read back).
  init(_ state: CallState) {
    self.init(
      callId: state.callId, callerId: state.callerId, calleeId: state.calleeId, answeredBy: state.calleeDeviceId,
      video: state.video, createdAt: state.createdAt, answeredAt: state.answeredAt, endedAt: state.endedAt,
      endReason: state.endReason,
      durationMs: state.endedAt.flatMap { ended in state.answeredAt.map { ended - $0 } })
  }

  func involves(_ userId: String) -> Bool { callerId == userId || calleeId == userId }
}
