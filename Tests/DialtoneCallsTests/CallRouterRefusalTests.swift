import DialtoneProtocol
import Foundation
import Testing

@testable import DialtoneCalls

/// Every `invalid-state` names the rule that refused the request, for the device that sent it
/// (protocol.md 13), rather than one stock phrase for every refusal.
struct CallRouterRefusalTests {
  let alice = Identity(userId: "alice", deviceId: "phone", name: "Alice")
  let aliceLaptop = Identity(userId: "alice", deviceId: "laptop", name: nil)
  let bobPhone = Identity(userId: "bob", deviceId: "phone", name: nil)
  let bobLaptop = Identity(userId: "bob", deviceId: "laptop", name: nil)
  let t0 = Date(timeIntervalSince1970: 1_800_000_000)

  private func refusal(_ router: inout CallRouter, _ message: ClientMessage, from who: Identity) -> String? {
    guard case .error(let e) = router.handle(message, id: "r", from: who, now: t0.addingTimeInterval(2)).reply,
      e.code == .invalidState
    else { return nil }
    return e.message
  }

  private func ringing() -> CallRouter {
    var router = CallRouter()
    _ = router.handle(.invite(.init(callId: "c1", to: "bob", video: false)), id: "i", from: alice, now: t0)
    return router
  }

  private func accepted() -> CallRouter {
    var router = ringing()
    _ = router.handle(.accept(.init(callId: "c1")), id: "a", from: bobPhone, now: t0.addingTimeInterval(1))
    return router
  }

  @Test func theAcceptingCalleesOwnIceRestartOfferIsToldTheCallerRestarts() {
    var router = accepted()
    let offer = ClientMessage.offer(.init(callId: "c1", sdp: "v=0", iceRestart: true))
    let text = refusal(&router, offer, from: bobPhone)
    #expect(text?.contains("only the caller restarts ICE") == true, "\(text ?? "no refusal")")
    #expect(text?.contains("another device") == false)
  }

  @Test func aCallersAcceptIsToldOnlyTheCalleeAccepts() {
    var router = ringing()
    let text = refusal(&router, .accept(.init(callId: "c1")), from: alice)
    #expect(text == "not allowed now: only the callee's devices send accept")
    var answered = accepted()
    #expect(
      refusal(&answered, .accept(.init(callId: "c1")), from: alice)
        == "not allowed now: only the callee's devices send accept")
  }

  @Test func anotherCalleeDeviceIsToldTheCallIsAcceptedElsewhere() {
    var router = accepted()
    for message: ClientMessage in [
      .accept(.init(callId: "c1")), .decline(.init(callId: "c1")), .hangup(.init(callId: "c1")),
      .answer(.init(callId: "c1", sdp: "v=0")),
    ] {
      #expect(
        refusal(&router, message, from: bobLaptop) == "not allowed now: the call is accepted on another device",
        "\(message.type)")
    }
  }

  @Test func theAcceptingDeviceAcceptingAgainIsAcknowledgedAndRingingAgainIsNamed() {
    var router = accepted()
    #expect(refusal(&router, .accept(.init(callId: "c1")), from: bobPhone) == nil)
    #expect(
      refusal(&router, .ringing(.init(callId: "c1")), from: bobPhone)
        == "not allowed now: this device has accepted the call already")
  }

  @Test func theCallersOtherDeviceIsToldWhichDevicePlacedTheCall() {
    var router = ringing()
    let text = refusal(&router, .offer(.init(callId: "c1", sdp: "v=0")), from: aliceLaptop)
    #expect(text == "not allowed now: only the device that placed the call (phone) sends offer")
    var answered = accepted()
    #expect(
      refusal(
        &answered, .candidate(.init(callId: "c1", candidate: IceCandidate(candidate: "candidate:1"))), from: aliceLaptop
      )
        == "not allowed now: only the two devices in the call send candidate")
  }

  @Test func aCalleeSignalingBeforeItsAcceptIsToldTheCallIsNotAcceptedYet() {
    var router = ringing()
    let text = refusal(&router, .iceRestartRequest(.init(callId: "c1")), from: bobPhone)
    #expect(text?.hasPrefix("not allowed now: the call has not been accepted yet") == true, "\(text ?? "none")")
    #expect(
      refusal(&router, .offer(.init(callId: "c1", sdp: "v=0")), from: bobPhone)
        == "not allowed now: the call has not been accepted yet: a callee device answers the invite with accept")
  }

  @Test func anEndedCallSaysItEndedAndWhy() {
    var router = accepted()
    _ = router.handle(.hangup(.init(callId: "c1")), id: "h", from: alice, now: t0.addingTimeInterval(3))
    #expect(
      refusal(&router, .offer(.init(callId: "c1", sdp: "v=0")), from: alice)
        == "not allowed now: the call has ended (hangup)")
  }
}
