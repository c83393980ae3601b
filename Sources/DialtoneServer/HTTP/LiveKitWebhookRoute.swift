import DialtoneNet
import DialtoneSFU

/// `POST /v1/livekit/webhook`: LiveKit's webhooks (point LiveKit's `webhook.urls` here). A
/// request that is not signed by our API key over its exact body is refused with 401.
struct LiveKitWebhookRoute {
  let sfu: LiveKitSFU

  func register(in router: inout Router) {
    router.add(.POST, "/v1/livekit/webhook") { request in
      do {
        try sfu.receiveWebhook(
          body: request.body, authorization: request.headers["Authorization"],
          contentType: request.headers["Content-Type"])
      } catch {
        throw HTTPError.unauthorized("webhook refused: \(error)")
      }
      return .text("ok\n")
    }
  }
}
