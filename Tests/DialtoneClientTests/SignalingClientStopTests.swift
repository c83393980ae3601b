import DialtoneClient
import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

/// `stop(draining:)`: the last requests (a hangup before the app quits) reach the server
/// before the socket closes, within a bound.
@Suite struct SignalingClientStopTests {
  let clock = ManualClock()
  let server = ScriptedServer(userId: "alice", deviceId: "phone")
  let client: SignalingClient

  init() {
    client = SignalingClient(
      configuration: .init(url: "ws://scripted.invalid/v1/ws"), transport: server, clock: clock
    ) { "token" }
  }

  private func connected() async throws {
    await client.start()
    #expect(await eventually(within: 10) { server.welcomed == 1 })
  }

  @Test func aDrainingStopWaitsForTheAnswerToTheLastRequest() async throws {
    try await connected()
    server.stopAnswering()
    let reply = try await client.submit(.hangup(.init(callId: "call-1")))
    let stopped = Task { await client.stop(draining: .seconds(7)) }
    #expect(await clock.waitForTimer(dueIn: 7))
    server.answerHeld()
    await stopped.value
    guard case .ack(let ack) = try await reply.value else {
      Issue.record("the hangup was not answered")
      return
    }
    #expect(ack.callId == "call-1")
  }

  @Test func aDrainingStopGivesUpAfterItsGrace() async throws {
    try await connected()
    server.stopAnswering()
    let reply = try await client.submit(.hangup(.init(callId: "call-1")))
    let stopped = Task { await client.stop(draining: .seconds(7)) }
    #expect(await clock.waitForTimer(dueIn: 7))
    clock.advance(by: .seconds(7))
    await stopped.value
    await #expect(throws: SignalingClientError.self) { try await reply.value }
    #expect(server.saw(.hangup, "call-1"))
  }

  @Test func withNothingPendingADrainingStopIsImmediate() async throws {
    try await connected()
    _ = try await client.request(.ping(.init()))
    await client.stop(draining: .seconds(7))
    await #expect(throws: SignalingClientError.self) { try await client.submit(.ping(.init())) }
  }
}
