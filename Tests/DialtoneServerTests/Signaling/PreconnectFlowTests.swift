import DialtoneProtocol
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

/// Pre-connect while ringing (protocol.md 11) through the real server: the extension is agreed
/// in `welcome`, each leg's signaling reaches only its device, and the accept on a leg wins.
@Suite(.serialized) struct PreconnectFlowTests {
  private func connect(_ server: TestServer, _ user: String, _ device: String) async throws -> SignalingProbe {
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await probe.hello(
      token: server.token(user, device: device), features: ["some-future-feature", "preconnect", "preconnect"])
    #expect(welcome.features == ["preconnect"])
    return probe
  }

  @Test func aClientThatNamesNoFeaturesGetsNone() async throws {
    let server = try await TestServer()
    let probe = try SignalingProbe(client: server.client, url: server.webSocketURL)
    let welcome = try await probe.hello(token: server.token("alice", device: "phone"))
    #expect(welcome.features.isEmpty)
    await server.stop()
  }

  @Test func twoDevicesPreconnectAndTheOneThatAnswersWins() async throws {
    let server = try await TestServer()
    let alice = try await connect(server, "alice", "phone")
    let laptop = try await connect(server, "bob", "laptop")
    let tablet = try await connect(server, "bob", "tablet")
    let call = callID()
    let invite = ClientMessage.invite(
      .init(callId: call, to: "bob", video: false, offer: SessionDescription(sdp: "v=0 main"), preconnect: true))
    #expect(try await alice.request(invite).isAck)
    for device in [laptop, tablet] {
      guard case .invite(let rung) = try await device.expect(.invite) else { return }
      #expect(rung.preconnect)
      #expect(try await device.request(.ringing(.init(callId: call, preconnect: true))).isAck)
    }
    for expected in ["laptop", "tablet"] {
      guard case .ringing(let ringing) = try await alice.expect(.ringing) else { return }
      #expect(ringing.preconnect && ringing.from.deviceId == expected)
    }
    // One leg per device: each offer and candidate reaches its device only.
    for (device, probe) in [("laptop", laptop), ("tablet", tablet)] {
      #expect(try await alice.request(.offer(.init(callId: call, sdp: "v=0 leg \(device)", toDevice: device))).isAck)
      #expect(
        try await alice.request(.candidate(.init(callId: call, candidate: candidate(1), toDevice: device))).isAck)
      guard case .offer(let offer) = try await probe.expect(.offer) else { return }
      #expect(offer.sdp == "v=0 leg \(device)" && offer.leg)
      _ = try await probe.expect(.candidate)
      try await probe.expectQuiet()
      #expect(try await probe.request(.answer(.init(callId: call, sdp: "v=0 early \(device)"))).isAck)
      #expect(try await probe.request(.candidate(.init(callId: call, candidate: candidate(2)))).isAck)
      guard case .answer(let answer) = try await alice.expect(.answer) else { return }
      #expect(answer.from.deviceId == device && answer.sdp == "v=0 early \(device)")
      _ = try await alice.expect(.candidate)
    }
    #expect(try await tablet.request(.accept(.init(callId: call))).isAck)
    guard case .accept(let accept) = try await alice.expect(.accept) else { return }
    #expect(accept.preconnected && accept.from.deviceId == "tablet" && accept.answer == nil)
    guard case .callEnded(let ended) = try await laptop.expect(.callEnded) else { return }
    #expect(ended.reason == .answeredElsewhere)
    // The call goes on between the caller and the winning leg.
    #expect(try await alice.request(.candidate(.init(callId: call, candidate: candidate(3)))).isAck)
    _ = try await tablet.expect(.candidate)
    #expect(try await alice.request(.hangup(.init(callId: call))).isAck)
    _ = try await tablet.expect(.callEnded)
    await server.stop()
  }
}
