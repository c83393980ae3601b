import DialtoneClient
import DialtoneProtocol
import Foundation
import Testing

@Suite struct SDPCandidatesTests {
  private let offer = [
    "v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE 0 data",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=mid:0", "a=rtpmap:111 opus/48000/2",
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "a=mid:data", "",
  ].joined(separator: "\r\n")

  @Test func candidatesGoIntoTheirSectionFollowedByEndOfCandidates() {
    let sdp = SDPCandidates.embedding(
      [
        IceCandidate(candidate: "candidate:1 1 udp 2122260223 10.0.0.1 5000 typ host", sdpMid: "0", sdpMLineIndex: 0),
        IceCandidate(candidate: "candidate:2 1 udp 1686052607 203.0.113.7 6000 typ srflx", sdpMLineIndex: 1),
        IceCandidate(candidate: ""),
      ], in: offer)
    let lines = sdp.components(separatedBy: "\r\n")
    #expect(
      lines == [
        "v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE 0 data",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=mid:0", "a=rtpmap:111 opus/48000/2",
        "a=candidate:1 1 udp 2122260223 10.0.0.1 5000 typ host", "a=end-of-candidates",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "a=mid:data",
        "a=candidate:2 1 udp 1686052607 203.0.113.7 6000 typ srflx", "a=end-of-candidates", "",
      ])
  }

  @Test func aDescriptionWithoutMediaIsLeftAlone() {
    #expect(SDPCandidates.embedding([IceCandidate(candidate: "candidate:1")], in: "v=0\r\n") == "v=0\r\n")
  }
}
