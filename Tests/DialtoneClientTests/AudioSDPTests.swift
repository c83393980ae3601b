import DialtoneClient
import Foundation
import Testing

/// Dialtone's audio rules on real descriptions: a Chromium offer (headless Chromium on this
/// machine) and one webrtcbin 1.22 writes with `fec-type=ulp-red` and Dialtone's Opus caps (as
/// the GStreamer engine configures it); ICE and fingerprint lines shortened.
@Suite struct AudioSDPTests {
  static let chromiumOffer = """
    v=0\r
    o=- 1327060490458549649 2 IN IP4 127.0.0.1\r
    s=-\r
    t=0 0\r
    a=group:BUNDLE 0\r
    a=extmap-allow-mixed\r
    a=msid-semantic: WMS\r
    m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126\r
    c=IN IP4 0.0.0.0\r
    a=rtcp:9 IN IP4 0.0.0.0\r
    a=ice-ufrag:FtTO\r
    a=ice-pwd:vtPLboR2xzj5/6/yng/2BtdY\r
    a=ice-options:trickle\r
    a=setup:actpass\r
    a=mid:0\r
    a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level\r
    a=sendrecv\r
    a=rtcp-mux\r
    a=rtcp-rsize\r
    a=rtpmap:111 opus/48000/2\r
    a=rtcp-fb:111 transport-cc\r
    a=fmtp:111 minptime=10;useinbandfec=1\r
    a=rtpmap:63 red/48000/2\r
    a=fmtp:63 111/111\r
    a=rtpmap:9 G722/8000\r
    a=rtpmap:0 PCMU/8000\r
    a=rtpmap:8 PCMA/8000\r
    a=rtpmap:13 CN/8000\r
    a=rtpmap:110 telephone-event/48000\r
    a=rtpmap:126 telephone-event/8000\r
    a=ssrc:914797820 cname:wBzTn0Q3yfHcLtf6\r

    """

  static let webrtcbinOffer = """
    v=0\r
    o=- 1142063782420390357 0 IN IP4 0.0.0.0\r
    s=-\r
    t=0 0\r
    a=ice-options:trickle\r
    a=group:BUNDLE audio0\r
    m=audio 9 UDP/TLS/RTP/SAVPF 111 96 97\r
    c=IN IP4 0.0.0.0\r
    a=setup:actpass\r
    a=ice-ufrag:dTrV/mc0O4gbp1kv/PZhX9zpJsJUfefO\r
    a=ice-pwd:kC+ND22MYYYKvzPiy57pQQtWlQoGVSwe\r
    a=rtcp-mux\r
    a=rtcp-rsize\r
    a=sendrecv\r
    a=rtpmap:111 OPUS/48000/2\r
    a=rtcp-fb:111 transport-cc\r
    a=rtpmap:96 red/48000\r
    a=rtpmap:97 ulpfec/48000\r
    a=mid:audio0\r
    a=rtcp-mux-only\r

    """

  private func mLine(_ sdp: String) -> String? {
    sdp.split(separator: "\r\n").first { $0.hasPrefix("m=audio") }.map(String.init)
  }

  private func lines(_ sdp: String) -> [String] { sdp.split(separator: "\r\n").map(String.init) }

  @Test func webrtcbinsOfferGetsOpusParametersREDFirstAndNoULPFEC() {
    let out = AudioSDP.local(Self.webrtcbinOffer, profile: .standard)
    #expect(mLine(out) == "m=audio 9 UDP/TLS/RTP/SAVPF 96 111")
    let l = lines(out)
    #expect(l.contains("a=fmtp:111 useinbandfec=1;usedtx=0;maxaveragebitrate=32000"))
    #expect(l.contains("a=rtpmap:96 red/48000/2"))
    #expect(l.contains("a=fmtp:96 111/111"))
    #expect(l.contains("a=ptime:20"))
    #expect(!out.contains("ulpfec"))
    #expect(!l.contains { $0.hasPrefix("a=rtpmap:97") })
    // The fmtp follows its rtpmap; everything else stays, line ends too.
    #expect(
      l.firstIndex(of: "a=fmtp:111 useinbandfec=1;usedtx=0;maxaveragebitrate=32000")
        == l.firstIndex(of: "a=rtpmap:111 OPUS/48000/2").map { $0 + 1 })
    #expect(l.contains("a=rtcp-mux-only"))
    #expect(out.hasSuffix("\r\n"))
    #expect(!out.contains("\n\n"))
  }

  @Test func chromiumsOfferKeepsItsParametersAndCodecsAndPutsREDFirst() {
    let out = AudioSDP.local(Self.chromiumOffer, profile: .standard)
    #expect(mLine(out) == "m=audio 9 UDP/TLS/RTP/SAVPF 63 111 9 0 8 13 110 126")
    let l = lines(out)
    #expect(l.contains("a=fmtp:111 minptime=10;useinbandfec=1;usedtx=0;maxaveragebitrate=32000"))
    #expect(l.filter { $0.hasPrefix("a=fmtp:63") } == ["a=fmtp:63 111/111"])
    #expect(l.contains("a=rtpmap:110 telephone-event/48000"))
  }

  @Test func withoutRedundancyREDAndItsParametersGo() {
    var profile = AudioProfile.standard
    profile.redundancy = false
    profile.dtx = true
    profile.packetTimeMs = 40
    let out = AudioSDP.local(Self.chromiumOffer, profile: profile)
    #expect(mLine(out) == "m=audio 9 UDP/TLS/RTP/SAVPF 111 9 0 8 13 110 126")
    #expect(!out.contains("red/48000"))
    #expect(!out.contains("a=fmtp:63"))
    #expect(lines(out).contains("a=fmtp:111 minptime=10;useinbandfec=1;usedtx=1;maxaveragebitrate=32000"))
    #expect(lines(out).contains("a=ptime:40"))
  }

  @Test func applyingTheRulesTwiceChangesNothingMore() {
    let once = AudioSDP.local(Self.webrtcbinOffer, profile: .standard)
    #expect(AudioSDP.local(once, profile: .standard) == once)
  }

  @Test func rejectedAndNonAudioSectionsAndDescriptionsWithoutOpusStayAsTheyAre() {
    let rejected = Self.chromiumOffer.replacingOccurrences(of: "m=audio 9 ", with: "m=audio 0 ")
    #expect(AudioSDP.local(rejected, profile: .standard) == rejected)
    let video = "v=0\nm=video 9 UDP/TLS/RTP/SAVPF 96\na=rtpmap:96 VP8/90000\n"
    #expect(AudioSDP.local(video, profile: .standard) == video)
    let pcmu = "v=0\nm=audio 9 UDP/TLS/RTP/SAVPF 0\na=rtpmap:0 PCMU/8000\n"
    #expect(AudioSDP.local(pcmu, profile: .standard) == pcmu)
    #expect(AudioSDP.sending(toward: pcmu, profile: .standard) == nil)
    #expect(AudioSDP.local("", profile: .standard) == "")
  }

  @Test func theSenderFollowsChromiumsDescription() {
    let sending = AudioSDP.sending(toward: Self.chromiumOffer, profile: .standard)
    #expect(
      sending
        == AudioSendParameters(
          opusPayloadType: 111, inbandFEC: true, dtx: false, bitrate: 32_000, packetTimeMs: 20,
          redundancyPayloadType: 63))
  }

  @Test func theSenderTakesLessBitrateAndShorterPacketsWhenAskedAndNoFECUnlessAsked() {
    let asked = Self.chromiumOffer
      .replacingOccurrences(of: "a=fmtp:111 minptime=10;useinbandfec=1", with: "a=fmtp:111 maxaveragebitrate=16000")
      .replacingOccurrences(of: "a=rtcp-mux\r\n", with: "a=rtcp-mux\r\na=ptime:60\r\na=maxptime:40\r\n")
    let sending = AudioSDP.sending(toward: asked, profile: .standard)
    #expect(sending?.bitrate == 16_000)
    #expect(sending?.packetTimeMs == 40)
    #expect(sending?.inbandFEC == false)
    // A bitrate out of RFC 7587's range is ignored.
    let wild = Self.chromiumOffer.replacingOccurrences(of: "useinbandfec=1", with: "maxaveragebitrate=1")
    #expect(AudioSDP.sending(toward: wild, profile: .standard)?.bitrate == 32_000)
  }

  @Test func webrtcbinsAnswerAfterTheRulesNegotiatesRED() {
    let answer = AudioSDP.local(Self.webrtcbinOffer, profile: .standard)
    #expect(AudioSDP.redundancyPayloadType(in: answer) == 96)
    #expect(AudioSDP.sending(toward: answer, profile: .standard)?.redundancyPayloadType == 96)
    var noRED = AudioProfile.standard
    noRED.redundancy = false
    #expect(AudioSDP.sending(toward: answer, profile: noRED)?.redundancyPayloadType == nil)
  }

  @Test func lineEndsOfTheInputAreKept() {
    let unix = Self.webrtcbinOffer.replacingOccurrences(of: "\r\n", with: "\n")
    let out = AudioSDP.local(unix, profile: .standard)
    #expect(!out.contains("\r"))
    #expect(out.contains("a=rtpmap:96 red/48000/2\na=fmtp:96 111/111\n"))
  }
}
