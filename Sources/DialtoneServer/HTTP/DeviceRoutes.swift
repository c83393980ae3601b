import DialtoneNet
import DialtoneProtocol
import DialtoneStorage
import DialtoneSupport
import Foundation

/// Push registration: `POST /v1/devices`, `GET /v1/devices`, `DELETE /v1/devices/{installationId}`.
struct DeviceRoutes {
  let authenticator: TokenAuthenticator
  let store: any DeviceStore
  let clock: any DialtoneClock
  /// Installations one user may have registered (`ServerLimits.maxPushRegistrationsPerUser`).
  var maxPerUser = ServerLimits().maxPushRegistrationsPerUser

  func register(in router: inout Router) {
    router.add(.POST, "/v1/devices") { request in
      let identity = try authenticator.authenticate(request)
      let registration: DeviceRegistration
      do throws(ProtocolError) {
        registration = try MessageCodec.decode(DeviceRegistration.self, from: request.body)
        try registration.validate()
      } catch {
        throw HTTPError(status: error.code.httpStatus, code: error.code.rawValue, message: error.message)
      }
      let registered = try await store.devices(of: identity.userId)
      if registered.count >= maxPerUser,
        !registered.contains(where: { $0.installationId == registration.installationId })
      {
        throw HTTPError(
          status: ErrorCode.limitExceeded.httpStatus, code: ErrorCode.limitExceeded.rawValue,
          message: "at most \(maxPerUser) installations per user: DELETE one that is no longer used")
      }
      let stored = try await store.upsert(
        installationId: registration.installationId, platform: registration.platform,
        tokens: registration.normalized().pushTokens, userId: identity.userId, deviceId: identity.deviceId,
        now: clock.now.millisecondsSince1970)
      return .wire(stored.info)
    }

    router.add(.GET, "/v1/devices") { request in
      let identity = try authenticator.authenticate(request)
      return .wire(DeviceListResponse(devices: try await store.devices(of: identity.userId).map(\.info)))
    }

    router.add(.DELETE, "/v1/devices/{installationId}") { request in
      let identity = try authenticator.authenticate(request)
      let installationId = request.pathParameters["installationId"] ?? ""
      guard try await store.remove(installationId: installationId, userId: identity.userId) else {
        throw HTTPError.notFound("no installation \(installationId) for this user")
      }
      return HTTPResponse(status: 204)
    }
  }
}
