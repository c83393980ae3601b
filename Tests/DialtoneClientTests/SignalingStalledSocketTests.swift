import DialtoneClient
import DialtoneClientLinux
import DialtoneNet
import DialtoneProtocol
import DialtoneServer
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

private let secret = "stalled-socket-secret-0123456789"

/// A hangup written on a socket that has stopped carrying anything (TCP backed off after losses
/// on a congested link: the e2e scenario `video_both_ways_over_a_narrow_link`) still reaches the
/// server while the app waits to stop, over real sockets: the client gives that socket up for a
/// fresh one, which resumes the session and re-sends the hangup.
@Suite(.serialized) struct SignalingStalledSocketTests {
  typealias Inbox = SignalingClientTests.Inbox

  @Test func aHangupOnAStalledSocketReachesTheOtherSideBeforeTheStop() async throws {
    let loopback = try await LoopbackServer(secret: secret)
    let relay = try FreezingRelay(to: loopback.server.port)
    // Alice's signaling crosses the relay; Bob's goes straight to the server.
    var configuration = SignalingClient.Configuration(url: "ws://127.0.0.1:\(relay.port)/v1/ws")
    configuration.drainStall = .milliseconds(300)
    let alice = SignalingClient(
      configuration: configuration, transport: LWSSignalingTransport(client: loopback.network)
    ) { try loopback.token("alice", device: "phone") }
    let bob = SignalingClient(
      configuration: .init(url: loopback.webSocketURL), transport: LWSSignalingTransport(client: loopback.network)
    ) { try loopback.token("bob", device: "phone") }
    let aliceInbox = Inbox(alice)
    let bobInbox = Inbox(bob)
    await alice.start()
    await bob.start()
    try await aliceInbox.waitFor("alice connected") { $0.connections == 1 }
    try await bobInbox.waitFor("bob connected") { $0.connections == 1 }

    let call = "call-" + UUID().uuidString
    _ = try await alice.request(
      .invite(.init(callId: call, to: "bob", video: false, offer: SessionDescription(sdp: "v=0\r\n"))))
    try await bobInbox.waitFor("the invite") { $0.messages.contains { $0.knownType == .invite } }
    _ = try await bob.request(.accept(.init(callId: call, answer: SessionDescription(sdp: "v=0\r\n"))))
    try await aliceInbox.waitFor("the accept") { $0.messages.contains { $0.knownType == .accept } }

    // Alice's connection stops carrying anything; she hangs up and quits, with a grace far
    // longer than the test needs (it ends as soon as the hangup is answered).
    relay.freeze()
    let hangup = try await alice.submit(.hangup(.init(callId: call)))
    await alice.stop(draining: .seconds(20))

    let answer = try? await hangup.value
    #expect(answer?.knownType == .ack, "the hangup was not answered before the stop: \(String(describing: answer))")
    try await bobInbox.waitFor("the hangup") {
      $0.messages.contains {
        guard case .callEnded(let ended) = $0 else { return false }
        return ended.callId == call && ended.reason == .hangup
      }
    }
    #expect(relay.accepted >= 2, "the hangup did not go on a fresh connection")

    await bob.stop()
    relay.stop()
    await loopback.stop()
  }
}
