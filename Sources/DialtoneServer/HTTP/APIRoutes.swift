import DialtoneNet
import DialtoneProtocol
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
      return .wire(
        IceServersResponse(iceServers: iceServers.servers(for: identity.userId, now: clock.now), ttl: iceServers.ttl))
    }

    router.add(.GET, "/v1/calls") { request in
      let identity = try authenticate(request)
      var limit = 50
      if let text = request.query["limit"] {
        guard let parsed = Int(text), (1...200).contains(parsed) else {
          throw HTTPError.badRequest("limit must be 1...200")
        }
        limit = parsed
      }
      var cursor: HistoryCursor?
      if let text = request.query["before"] {
        guard let parsed = HistoryCursor(token: text) else {
          throw HTTPError.badRequest("before is not a cursor from \"next\"")
        }
        cursor = parsed
      }
      let calls = try await store.history(of: identity.userId, limit: limit + 1, before: cursor)
      let page = Array(calls.prefix(limit))
      let next =
        calls.count > limit ? page.last.map { HistoryCursor(createdAt: $0.createdAt, callId: $0.callId).token } : nil
      return .wire(CallHistoryResponse(calls: page, next: next))
    }

    router.add(.GET, "/v1/group-calls") { request in
      let identity = try authenticate(request)
      var limit = 50
      if let text = request.query["limit"] {
        guard let parsed = Int(text), (1...200).contains(parsed) else {
          throw HTTPError.badRequest("limit must be 1...200")
        }
        limit = parsed
      }
      var cursor: HistoryCursor?
      if let text = request.query["before"] {
        guard let parsed = HistoryCursor(token: text) else {
          throw HTTPError.badRequest("before is not a cursor from \"next\"")
        }
        cursor = parsed
      }
      let calls = try await store.groupHistory(of: identity.userId, limit: limit + 1, before: cursor)
      let page = Array(calls.prefix(limit))
      let next =
        calls.count > limit ? page.last.map { HistoryCursor(createdAt: $0.createdAt, callId: $0.callId).token } : nil
      return .wire(GroupCallHistoryResponse(calls: page, next: next))
    }

    DeviceRoutes(authenticator: authenticator, store: store, clock: clock).register(in: &router)
  }

  private func authenticate(_ request: HTTPRequest) throws(HTTPError) -> Identity {
    try authenticator.authenticate(request)
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
