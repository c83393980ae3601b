import DialtoneSupport
import Foundation

/// What the webhook route calls: the signature and body checks, then the replay guard, on the
/// injected clock. Only a verified event is remembered, so forged requests cannot evict real ids.
package final class LiveKitWebhookReceiver: Sendable {
  package let verifier: LiveKitWebhookVerifier
  package let replayGuard: LiveKitWebhookReplayGuard
  private let clock: any DialtoneClock

  package init(
    verifier: LiveKitWebhookVerifier, replayGuard: LiveKitWebhookReplayGuard = LiveKitWebhookReplayGuard(),
    clock: any DialtoneClock
  ) {
    self.verifier = verifier
    self.replayGuard = replayGuard
    self.clock = clock
  }

  package func receive(body: [UInt8], authorization: String?, contentType: String?) throws(LiveKitWebhookError)
    -> LiveKitWebhookEvent
  {
    let now = clock.now
    let event = try verifier.verify(body: body, authorization: authorization, contentType: contentType, now: now)
    try replayGuard.admit(event.id, now: now)
    return event
  }
}
