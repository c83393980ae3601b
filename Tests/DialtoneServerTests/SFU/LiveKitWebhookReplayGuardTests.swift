import DialtoneSFU
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneSFU
@testable import DialtoneServer

@Suite struct LiveKitWebhookReplayGuardTests {
  let now = LiveKitFixture.now

  @Test func refusesAnIDSeenWithinTenMinutes() throws {
    let guardian = LiveKitWebhookReplayGuard()
    try guardian.admit("EV_1", now: now)
    try guardian.admit("EV_2", now: now)
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_1")) { try guardian.admit("EV_1", now: now) }
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_1")) { try guardian.admit("EV_1", now: now + 599) }
    try guardian.admit("EV_1", now: now + 600)
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_1")) { try guardian.admit("EV_1", now: now + 601) }
  }

  @Test func forgetsExpiredIDs() throws {
    let guardian = LiveKitWebhookReplayGuard(window: .seconds(10))
    for index in 0..<50 { try guardian.admit("EV_\(index)", now: now + Double(index) * 0.1) }
    #expect(guardian.count == 50)
    try guardian.admit("EV_late", now: now + 15)
    #expect(guardian.count == 1)
  }

  @Test func aClockThatStepsBackStillRefuses() throws {
    let guardian = LiveKitWebhookReplayGuard()
    try guardian.admit("EV_1", now: now)
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_1")) { try guardian.admit("EV_1", now: now - 3600) }
  }

  @Test func dropsTheOldestPastItsCapacity() throws {
    let guardian = LiveKitWebhookReplayGuard(capacity: 100)
    for index in 0..<150 { try guardian.admit("EV_\(index)", now: now + Double(index) * 0.001) }
    #expect(guardian.count == 100)
    // The first 50 were forgotten, the last 100 are still refused.
    try guardian.admit("EV_0", now: now + 1)
    try guardian.admit("EV_49", now: now + 1)
    for index in [52, 100, 149] {
      #expect(throws: LiveKitWebhookError.replayed(id: "EV_\(index)")) {
        try guardian.admit("EV_\(index)", now: now + 1)
      }
    }
    #expect(guardian.count == 100)
  }

  @Test func defaultBoundIsTenThousandIDs() throws {
    let guardian = LiveKitWebhookReplayGuard()
    for index in 0..<10_050 { try guardian.admit("EV_\(index)", now: now) }
    #expect(guardian.count == 10_000)
    try guardian.admit("EV_0", now: now)
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_10049")) { try guardian.admit("EV_10049", now: now) }
  }

  /// An id admitted again after its window leaves its old entry queued behind a newer one; when
  /// the clock has jumped, expiry from the front cannot reach it. The queue must stay bounded.
  @Test func readmissionsBehindAJumpedClockKeepTheQueueBounded() {
    var recent = LiveKitRecentIDs(window: 10, capacity: 8)
    let anchored = recent.admit("EV_anchor", now: now + 1_000_000)
    #expect(anchored)
    for round in 0..<1_000 {
      let admitted = recent.admit("EV_again", now: now + Double(round) * 20)
      #expect(admitted)
      #expect(recent.count <= 8)
      #expect(recent.queued <= 16)
    }
  }

  @Test func receiverRemembersOnlyVerifiedEvents() throws {
    let clock = ManualClock(start: now)
    let receiver = LiveKitWebhookReceiver(
      verifier: LiveKitWebhookVerifier(credentials: LiveKitFixture.credentials), clock: clock)
    let body = LiveKitFixture.webhookBody()
    let type = LiveKitWebhookVerifier.contentType

    // A forgery carrying the real event's id is refused for its signature and not remembered ...
    let forger = LiveKitCredentials(apiKey: LiveKitFixture.credentials.apiKey, apiSecret: "guessed")
    let forged = try LiveKitFixture.webhookToken(for: body, credentials: forger)
    #expect(throws: LiveKitWebhookError.badSignature) {
      try receiver.receive(body: body, authorization: forged, contentType: type)
    }
    // ... so the genuine event still gets through once, and its replay does not.
    let token = try LiveKitFixture.webhookToken(for: body)
    #expect(try receiver.receive(body: body, authorization: token, contentType: type).id == "EV_fixture1")
    clock.advance(by: .seconds(30))
    #expect(throws: LiveKitWebhookError.replayed(id: "EV_fixture1")) {
      try receiver.receive(body: body, authorization: token, contentType: type)
    }
    #expect(receiver.replayGuard.count == 1)
  }
}
