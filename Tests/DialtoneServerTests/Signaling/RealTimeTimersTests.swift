import DialtoneNet
import DialtoneProtocol
import DialtoneSupport
import DialtoneTestSupport
import Foundation
import Testing

@testable import DialtoneServer

private let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"

/// The hub's timers on real time: they run on its network loop (`NetworkLoopClock`), not on a
/// dispatch timer; a virtual clock a test passes stays as it is.
struct RealTimeTimersTests {
  @Test func theHubKeepsItsTimersOnItsLoopOnlyOnRealTime() async throws {
    let real = try await TestServer(realTime: true)
    let realClock = await real.server.hub.clock
    #expect(realClock is NetworkLoopClock)
    await real.stop()
    let virtual = try await TestServer()
    let virtualClock = await virtual.server.hub.clock
    #expect(virtualClock is ManualClock)
    await virtual.stop()
  }

  /// One call rings out (its ring timer fires on the loop), another is answered first (its ring
  /// timer, cancelled on the loop, never fires: the answered call is not ended when the first
  /// one's timeout, which came after its own, has passed).
  @Test func aRingTimerFiresOnTheLoopAndOneCancelledThereDoesNot() async throws {
    let server = try await TestServer(configure: { $0.ringTimeout = 1 }, realTime: true)
    var failure: (any Error)?
    do { try await ringOutOneCallAndAnswerAnother(server) } catch { failure = error }
    await server.stop()
    if let failure { throw failure }
  }

  private func ringOutOneCallAndAnswerAnother(_ server: TestServer) async throws {
    let carol = try await server.connect("carol")
    let dave = try await server.connect("dave")
    let answered = callID("answered")
    #expect(try await carol.invite(answered, to: "dave").isAck)
    _ = try await dave.expect(.invite)
    #expect(try await dave.act(.accept(.init(callId: answered, answer: SessionDescription(sdp: sdp)))).isAck)
    _ = try await carol.expect(.accept)

    let alice = try await server.connect("alice")
    let bob = try await server.connect("bob")
    let missed = callID("missed")
    #expect(try await alice.invite(missed, to: "bob").isAck)
    _ = try await bob.expect(.invite)
    #expect(try await alice.expect(.callEnded).endReason == .missed)
    #expect(try await bob.expect(.callEnded).endReason == .missed)
    try await carol.expectQuiet()
    try await dave.expectQuiet()
  }
}
