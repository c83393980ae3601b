import DialtoneClient
import DialtoneProtocol
import DialtoneSupport
import Foundation
import Testing

@testable import DialtoneGStreamer

/// The single subscriber connection's sections (protocol.md 20.9): who each mid carries, and
/// the SFU's inactive sections held open for webrtcbin 1.22, which cannot change a direction.
@Suite struct GStreamerSectionsTests {
  static let offer = [
    "v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=VideoRoom", "t=0 0", "a=group:BUNDLE 0 1 2",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=sendonly", "a=mid:0",
    "m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=inactive", "a=mid:1",
    "m=video 9 UDP/TLS/RTP/SAVPF 96", "a=mid:2", "a=inactive", "",
  ].joined(separator: "\r\n")

  @Test func inactiveSectionsAreShownSendOnlyAndAnsweredInactiveOnTheWireOnly() {
    let sections = GStreamerSections(participantAudio: nil)
    let shown = sections.remote(offer: SessionDescription(sdp: Self.offer)).sdp
    #expect(!shown.contains("a=inactive") && shown.components(separatedBy: "a=sendonly").count == 4)
    #expect(shown.hasSuffix("\r\n") && !shown.contains("\n\n"))
    let answer = SessionDescription(
      sdp: Self.offer.replacingOccurrences(of: "a=inactive", with: "a=recvonly").replacingOccurrences(
        of: "a=sendonly", with: "a=recvonly"))
    let wire = sections.wire(answer: answer).sdp
    // Section 0 stays recvonly; 1 and 2 (inactive in the offer) are answered inactive...
    #expect(wire.components(separatedBy: "a=recvonly").count == 2)
    #expect(wire.components(separatedBy: "a=inactive").count == 3)
    // ...and applied locally as webrtcbin made them.
    #expect(sections.local(answer: SessionDescription(sdp: wire)).sdp == answer.sdp)
    // A later offer that reuses section 1 (sendonly again) changes nothing for webrtcbin.
    let reused = Self.offer.replacingOccurrences(of: "a=inactive\r\na=mid:1", with: "a=sendonly\r\na=mid:1")
    _ = sections.remote(offer: SessionDescription(sdp: reused))
    #expect(sections.wire(answer: answer).sdp.components(separatedBy: "a=inactive").count == 2)
  }

  @Test func eachMidsMediaGoesToWhomTheLatestOfferSaysItCarries() {
    let bob = Peer(userId: "bob", deviceId: "laptop")
    let dave = Peer(userId: "dave", deviceId: "phone")
    let sinks = SinkLog()
    let sections = GStreamerSections(participantAudio: { peer in { _ in sinks.append(peer.userId) } })
    sections.set([GroupStreamSection(mid: "0", kind: .audio, from: bob)])
    let audio = RemoteAudio(samples: Data([0, 0]), arrived: 0, playoutDelay: 0)
    sections.audioSink(of: "0")?(audio)
    #expect(sections.audioSink(of: "1") == nil)
    // Bob left; Dave's audio reuses mid 0.
    sections.set([GroupStreamSection(mid: "0", kind: .audio, from: dave)])
    sections.audioSink(of: "0")?(audio)
    sections.videoFrame(of: "0", width: 2, height: 2, red: 1, green: 2, blue: 3)
    #expect(sinks.entries == ["bob", "dave"])
    #expect(sections.videoByParticipant.map(\.from) == [bob, dave])
    #expect(sections.videoByParticipant.map(\.video.frames) == [0, 1])
  }
}

private final class SinkLog: Sendable {
  private let list = Locked<[String]>([])
  func append(_ entry: String) { list.withLock { $0.append(entry) } }
  var entries: [String] { list.current }
}
