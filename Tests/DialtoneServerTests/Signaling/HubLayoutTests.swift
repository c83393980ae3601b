import DialtoneCalls
import DialtoneProtocol
import Testing

@testable import DialtoneServer

/// What the hub moves for every relayed message — the socket's event, each effect the router
/// returns, the output the gate lets out — is copied whole as it moves, at the size of its largest
/// case: rare, large payloads are kept out of line (`indirect`, `OutOfLine`) so that these stay the
/// size of a received frame's event and of a `send`.
struct HubLayoutTests {
  @Test func anEventIsTheSizeOfAReceivedFrames() {
    #expect(MemoryLayout<HubEvent>.size <= 64)
  }

  @Test func anEffectIsTheSizeOfASend() {
    let send = MemoryLayout<ServerMessage>.size + MemoryLayout<Recipient>.size
    #expect(MemoryLayout<CallEffect>.size <= send + 8)
  }

  @Test func anOutputHoldsOneReplyInline() {
    #expect(MemoryLayout<Output>.size <= MemoryLayout<ServerMessage>.size + 96)
  }
}
