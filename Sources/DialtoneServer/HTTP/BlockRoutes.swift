import DialtoneNet
import DialtoneProtocol
import DialtoneStorage
import DialtoneSupport
import Foundation

/// A user's blocks: `GET /v1/blocks`, `PUT /v1/blocks/{userId}`, `DELETE /v1/blocks/{userId}`.
/// Each request acts on the blocks of the token's user only; a change is stored, then handed to
/// the hub, so the next invite obeys it on every device at once.
struct BlockRoutes {
  let authenticator: TokenAuthenticator
  let store: any BlockStore
  let hub: SignalingHub
  let clock: any DialtoneClock
  var maxPerUser = ServerLimits().maxBlocksPerUser

  func register(in router: inout Router) {
    router.add(.GET, "/v1/blocks") { request in
      let identity = try authenticator.authenticate(request)
      return .wire(BlockListResponse(blocks: try await store.blocks(of: identity.userId)))
    }

    router.add(.PUT, "/v1/blocks/{userId}") { request in
      let identity = try authenticator.authenticate(request)
      let other = try Self.userId(request)
      // Valid in form, impossible in fact: 409, like any request at odds with the resource.
      guard other != identity.userId else {
        throw HTTPError(status: 409, code: ErrorCode.conflict.rawValue, message: "cannot block yourself")
      }
      let result = try await store.block(
        other, by: identity.userId, at: clock.now.millisecondsSince1970, limit: maxPerUser)
      guard result != .limitReached else {
        throw HTTPError(
          status: ErrorCode.limitExceeded.httpStatus, code: ErrorCode.limitExceeded.rawValue,
          message: "at most \(maxPerUser) blocked users: unblock one first")
      }
      await hub.setBlock(identity.userId, blocks: other, true)
      return HTTPResponse(status: 204)
    }

    router.add(.DELETE, "/v1/blocks/{userId}") { request in
      let identity = try authenticator.authenticate(request)
      let other = try Self.userId(request)
      _ = try await store.unblock(other, by: identity.userId)
      await hub.setBlock(identity.userId, blocks: other, false)
      return HTTPResponse(status: 204)
    }
  }

  private static func userId(_ request: HTTPRequest) throws(HTTPError) -> String {
    let other = request.pathParameters["userId"] ?? ""
    guard !other.isEmpty, other.utf8.count <= Limits.maxUserIDBytes else {
      throw .badRequest("a user id is 1 to \(Limits.maxUserIDBytes) bytes")
    }
    return other
  }
}
