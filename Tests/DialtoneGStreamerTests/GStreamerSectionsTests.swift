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

  /// An SFU offer of audio sections, each `(mid, ssrc)`: a nil SSRC is an inactive section.
  static func offer(_ sections: [(mid: String, ssrc: UInt32?)]) -> SessionDescription {
    var lines = ["v=0", "o=- 1 2 IN IP4 0.0.0.0", "s=VideoRoom", "t=0 0"]
    lines.append("a=group:BUNDLE " + sections.map(\.mid).joined(separator: " "))
    for section in sections {
      lines += ["m=audio 9 UDP/TLS/RTP/SAVPF 111", "a=mid:\(section.mid)"]
      if let ssrc = section.ssrc {
        lines += ["a=sendonly", "a=msid:janus janus\(section.mid)", "a=ssrc:\(ssrc) cname:janus"]
      } else {
        lines.append("a=inactive")
      }
    }
    return SessionDescription(sdp: (lines + [""]).joined(separator: "\r\n"))
  }

  @Test func eachMidsMediaGoesToWhomTheLatestOfferSaysItCarries() {
    let bob = Peer(userId: "bob", deviceId: "laptop")
    let dave = Peer(userId: "dave", deviceId: "phone")
    let sinks = SinkLog()
    let sections = GStreamerSections(participantAudio: { peer in { _ in sinks.append(peer.userId) } })
    sections.set([GroupStreamSection(mid: "0", kind: .audio, from: bob)])
    _ = sections.remote(offer: Self.offer([("0", 1000), ("1", nil)]))
    let audio = RemoteAudio(samples: Data([0, 0]), arrived: 0, playoutDelay: 0)
    sections.audioSink(of: "0", ssrc: 1000)?(audio)
    #expect(sections.audioSink(of: "1", ssrc: 2000) == nil)
    // Bob left; Dave's audio reuses mid 0, under an SSRC of its own.
    sections.set([GroupStreamSection(mid: "0", kind: .audio, from: dave)])
    _ = sections.remote(offer: Self.offer([("0", 3000), ("1", nil)]))
    sections.audioSink(of: "0", ssrc: 3000)?(audio)
    sections.videoFrame(of: "0", ssrc: 3000, width: 2, height: 2, red: 1, green: 2, blue: 3)
    // Bob's last packets, still in flight, are nobody's now.
    #expect(sections.audioSink(of: "0", ssrc: 1000) == nil)
    #expect(sinks.entries == ["bob", "dave"])
    #expect(sections.videoByParticipant.map(\.from) == [bob, dave])
    #expect(sections.videoByParticipant.map(\.video.frames) == [0, 1])
  }

  // The multistream flake (issue 38): Janus sends a sender report under a reused section's new
  // SSRC as soon as it makes the offer, often before the device applied that offer; webrtcbin
  // 1.22 then files the stream under m-line 0 (here the placeholder) for good. It is still the
  // participant's whose section the latest offer names that SSRC in.
  @Test func aStreamIsWhoeverTheOfferNamingItsSSRCSaysWhateverSectionWebrtcbinFiledItUnder() {
    let (bob, carol, dave) = (
      Peer(userId: "bob", deviceId: "cli"), Peer(userId: "carol", deviceId: "cli"),
      Peer(userId: "dave", deviceId: "cli")
    )
    let sinks = SinkLog()
    let sections = GStreamerSections(participantAudio: { peer in { _ in sinks.append(peer.userId) } })
    let audio = RemoteAudio(samples: Data([0, 0]), arrived: 0, playoutDelay: 0)
    // mid 0: the placeholder (it names an SSRC, carries nobody); Bob on 1, Carol on 2.
    sections.set([
      GroupStreamSection(mid: "1", kind: .audio, from: bob), GroupStreamSection(mid: "2", kind: .audio, from: carol),
    ])
    _ = sections.remote(offer: Self.offer([("0", 1), ("1", 2000), ("2", 3000)]))
    // Dave's stream, seen before the offer that names it, is nobody's yet (not the placeholder's
    // owner, not Bob's or Carol's), whatever section it was filed under.
    for filed in ["0", "1", "2"] { #expect(sections.audioSink(of: filed, ssrc: 4000) == nil) }
    // Bob left and Dave took over his section: the offer names Dave's SSRC there.
    sections.set([
      GroupStreamSection(mid: "1", kind: .audio, from: dave), GroupStreamSection(mid: "2", kind: .audio, from: carol),
    ])
    _ = sections.remote(offer: Self.offer([("0", 1), ("1", 4000), ("2", 3000)]))
    sections.audioSink(of: "0", ssrc: 4000)?(audio)
    sections.audioSink(of: "2", ssrc: 3000)?(audio)
    sections.videoFrame(of: "0", ssrc: 4000, width: 2, height: 2, red: 1, green: 2, blue: 3)
    #expect(sinks.entries == ["dave", "carol"])
    #expect(sections.videoByParticipant.first { $0.from == dave }?.video.frames == 1)
  }

  @Test func withoutSSRCsInTheOfferAStreamIsTheSectionsItWasFiledUnder() {
    let bob = Peer(userId: "bob", deviceId: "laptop")
    let sinks = SinkLog()
    let sections = GStreamerSections(participantAudio: { peer in { _ in sinks.append(peer.userId) } })
    sections.set([GroupStreamSection(mid: "0", kind: .audio, from: bob)])
    _ = sections.remote(offer: SessionDescription(sdp: Self.offer))
    sections.audioSink(of: "0", ssrc: 77)?(RemoteAudio(samples: Data([0, 0]), arrived: 0, playoutDelay: 0))
    #expect(sinks.entries == ["bob"])
  }

  // webrtcbin answers the SFU's actpass as the DTLS client and sends its first flight before ICE
  // can carry it (then the handshake waits a second for the retransmission): the answer makes
  // this side the server, on the wire and as applied.
  @Test func theAnswerMakesThisSideTheDTLSServer() {
    let sections = GStreamerSections(participantAudio: nil)
    _ = sections.remote(offer: Self.offer([("0", 1), ("1", nil)]))
    let answer = Self.offer([("0", nil), ("1", nil)]).sdp.replacingOccurrences(
      of: "a=inactive", with: "a=recvonly\r\na=setup:active")
    let wire = sections.wire(answer: SessionDescription(sdp: answer)).sdp
    #expect(!wire.contains("a=setup:active") && wire.components(separatedBy: "a=setup:passive").count == 3)
    #expect(sections.local(answer: SessionDescription(sdp: wire)).sdp.contains("a=setup:passive"))
  }

  @Test func theSSRCsOfAnOfferAreReadPerSection() {
    let sdp = Self.offer([("0", 11), ("a", nil), ("b", 4_294_967_295)]).sdp
      .replacingOccurrences(of: "a=ssrc:11 cname:janus", with: "a=ssrc:11 cname:janus\r\na=ssrc:12 msid:x y")
    #expect(GStreamerSections.ssrcMids(in: sdp) == [11: "0", 12: "0", 4_294_967_295: "b"])
    #expect(GStreamerSections.ssrcMids(in: "v=0\r\nm=audio 9 RTP 0\r\na=ssrc:junk\r\n").isEmpty)
  }
}

private final class SinkLog: Sendable {
  private let list = Locked<[String]>([])
  func append(_ entry: String) { list.withLock { $0.append(entry) } }
  var entries: [String] { list.current }
}
