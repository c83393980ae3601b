import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

@Suite struct IceTCPFallbackTests {
  static let udp = IceCandidate(
    candidate: "candidate:1 1 UDP 2015363327 10.0.0.1 50000 typ host", sdpMid: "0", sdpMLineIndex: 0)
  static let tcp = IceCandidate(
    candidate: "a=candidate:2 1 TCP 1015021823 10.0.0.1 9 typ host tcptype active", sdpMid: "0", sdpMLineIndex: 0)

  @Test func tcpIsHeldUntilTheDeadlineThenReleasedBothWays() {
    var fallback = IceTCPFallback(delay: .seconds(3))
    #expect(fallback.local(Self.udp, at: .seconds(10)) == Self.udp)
    #expect(fallback.local(Self.tcp, at: .seconds(10)) == nil)
    #expect(fallback.remote(Self.tcp, at: .seconds(11)) == nil)
    #expect(fallback.deadline == .seconds(14))
    #expect(fallback.release(at: .seconds(13)) == ([], []))
    let released = fallback.release(at: .seconds(14))
    #expect(released.local == [Self.tcp])
    #expect(released.remote == [Self.tcp])
    #expect(fallback.state == .released)
    #expect(fallback.remote(Self.tcp, at: .seconds(14)) == Self.tcp)
  }

  @Test func connectingFirstDropsTCPForGood() {
    var fallback = IceTCPFallback()
    #expect(fallback.remote(Self.tcp, at: .zero) == nil)
    fallback.connected()
    #expect(fallback.state == .connected)
    #expect(fallback.deadline == nil)
    #expect(fallback.release(at: .seconds(60)) == ([], []))
    #expect(fallback.local(Self.tcp, at: .seconds(61)) == nil)
    #expect(fallback.local(Self.udp, at: .seconds(61)) == Self.udp)
  }

  /// A caller's candidates go out long before the callee answers (no pre-connect, a slow
  /// answer): the wait starts with the first candidate of the other side, when checks can run,
  /// so TCP is not let in before UDP ever had a chance.
  @Test func theWaitStartsWhenBothSidesHaveACandidate() {
    var fallback = IceTCPFallback(delay: .seconds(3))
    #expect(fallback.local(Self.udp, at: .zero) == Self.udp)
    #expect(fallback.local(Self.tcp, at: .zero) == nil)
    #expect(fallback.deadline == nil)
    #expect(fallback.release(at: .seconds(30)) == ([], []))
    #expect(fallback.remote(Self.udp, at: .seconds(30)) == Self.udp)
    #expect(fallback.deadline == .seconds(33))
    fallback.connected()
    #expect(fallback.release(at: .seconds(40)) == ([], []))

    var other = IceTCPFallback(delay: .seconds(3))
    #expect(other.local(Self.tcp, at: .zero) == nil)
    other.remoteDescriptionHadCandidates(at: .seconds(5))
    #expect(other.deadline == .seconds(8))
  }

  @Test func transportIsReadFromTheCandidateLine() {
    #expect(IceTCPFallback.isTCP(Self.tcp))
    #expect(!IceTCPFallback.isTCP(Self.udp))
    #expect(!IceTCPFallback.isTCP(IceCandidate(candidate: "garbage", sdpMid: nil, sdpMLineIndex: nil)))
  }

  @Test func heldCandidatesAreBounded() {
    var fallback = IceTCPFallback()
    for _ in 0..<100 { _ = fallback.remote(Self.tcp, at: .zero) }
    #expect(fallback.heldRemote.count == 64)
  }
}
