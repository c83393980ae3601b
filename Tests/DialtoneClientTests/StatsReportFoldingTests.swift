import DialtoneClient
import Testing

@Suite struct StatsReportFoldingTests {
  // A libwebrtc-shaped report: two transports' bytes add up, the transport's selected pair
  // gives RTT and candidate types, RTP streams give packets and jitter.
  @Test func aReportFoldsIntoTheCallStats() {
    let entries: [StatsReportEntry] = [
      .init(
        id: "T01", type: "transport",
        values: [
          "bytesSent": .number(1200), "bytesReceived": .number(3400), "selectedCandidatePairId": .string("CP2"),
        ]),
      .init(id: "T02", type: "transport", values: ["bytesSent": .number(10), "bytesReceived": .number(20)]),
      .init(
        id: "CP1", type: "candidate-pair",
        values: [
          "nominated": .bool(true), "state": .string("succeeded"), "currentRoundTripTime": .number(0.9),
          "localCandidateId": .string("L1"), "remoteCandidateId": .string("R1"),
        ]),
      .init(
        id: "CP2", type: "candidate-pair",
        values: [
          "nominated": .bool(true), "state": .string("succeeded"), "currentRoundTripTime": .number(0.042),
          "localCandidateId": .string("L2"), "remoteCandidateId": .string("R2"),
        ]),
      .init(id: "L1", type: "local-candidate", values: ["candidateType": .string("host")]),
      .init(id: "L2", type: "local-candidate", values: ["candidateType": .string("relay")]),
      .init(id: "R2", type: "remote-candidate", values: ["candidateType": .string("srflx")]),
      .init(
        id: "IA", type: "inbound-rtp",
        values: [
          "packetsReceived": .number(500), "packetsLost": .number(7), "jitter": .number(0.004),
        ]),
      .init(
        id: "IV", type: "inbound-rtp",
        values: [
          "packetsReceived": .number(900), "packetsLost": .number(-2), "jitter": .number(0.011),
        ]),
      .init(id: "OA", type: "outbound-rtp", values: ["packetsSent": .number(480)]),
    ]
    let stats = PeerConnectionStats(folding: entries)
    #expect(
      stats
        == PeerConnectionStats(
          bytesSent: 1210, bytesReceived: 3420, packetsLost: 5, roundTripTime: 0.042, localCandidateType: "relay",
          remoteCandidateType: "srflx", packetsSent: 480, packetsReceived: 1400, jitter: 0.011))
  }

  // Video streams (kind "video") also fold into the video figures: bytes, frames, freezes,
  // the NACKs and PLIs each way, the encoder's target.
  @Test func videoStreamsFoldIntoTheVideoFigures() {
    let entries: [StatsReportEntry] = [
      .init(id: "IA", type: "inbound-rtp", values: ["kind": .string("audio"), "bytesReceived": .number(999)]),
      .init(
        id: "IV", type: "inbound-rtp",
        values: [
          "kind": .string("video"), "bytesReceived": .number(50_000), "packetsLost": .number(3),
          "framesDecoded": .number(300), "frameWidth": .number(640), "frameHeight": .number(360),
          "freezeCount": .number(2), "nackCount": .number(4), "pliCount": .number(1),
          "framesPerSecond": .number(29.5),
        ]),
      .init(
        id: "OV", type: "outbound-rtp",
        values: [
          "kind": .string("video"), "bytesSent": .number(70_000), "nackCount": .number(6), "pliCount": .number(2),
          "targetBitrate": .number(450_000),
        ]),
    ]
    var expected = VideoStats()
    expected.bytesReceived = 50_000
    expected.packetsLost = 3
    expected.framesDecoded = 300
    expected.frameWidth = 640
    expected.frameHeight = 360
    expected.framesPerSecond = 29.5
    expected.freezes = 2
    expected.nacksSent = 4
    expected.plisSent = 1
    expected.bytesSent = 70_000
    expected.nacksReceived = 6
    expected.plisReceived = 2
    expected.targetBitrate = 450_000
    #expect(PeerConnectionStats(folding: entries).video == expected)
    #expect(PeerConnectionStats(folding: Array(entries.prefix(1))).video == nil)
  }

  // The codec comes from the RTP stream's codec entry: the sent one wins over the received one.
  @Test func theVideoCodecIsTheSentStreamsElseTheReceivedOnes() {
    let codecs: [StatsReportEntry] = [
      .init(id: "C1", type: "codec", values: ["mimeType": .string("video/VP8")]),
      .init(id: "C2", type: "codec", values: ["mimeType": .string("video/H264")]),
    ]
    let inbound = StatsReportEntry(
      id: "IV", type: "inbound-rtp", values: ["kind": .string("video"), "codecId": .string("C1")])
    let outbound = StatsReportEntry(
      id: "OV", type: "outbound-rtp", values: ["kind": .string("video"), "codecId": .string("C2")])
    #expect(PeerConnectionStats(folding: codecs + [inbound, outbound]).video?.codec == "H264")
    #expect(PeerConnectionStats(folding: codecs + [inbound]).video?.codec == "VP8")
    #expect(PeerConnectionStats(folding: [inbound]).video?.codec == nil)
  }

  // Without a selected pair id, a nominated succeeded pair is used; numbers may be flags.
  @Test func aNominatedPairStandsInForTheSelectedOne() {
    let entries: [StatsReportEntry] = [
      .init(
        id: "P", type: "candidate-pair",
        values: [
          "nominated": .number(1), "state": .string("succeeded"), "currentRoundTripTime": .number(0.1),
          "localCandidateId": .string("L"),
        ]),
      .init(id: "Q", type: "candidate-pair", values: ["nominated": .bool(false), "state": .string("succeeded")]),
      .init(id: "L", type: "local-candidate", values: ["candidateType": .string("host")]),
    ]
    let stats = PeerConnectionStats(folding: entries)
    #expect(stats.roundTripTime == 0.1)
    #expect(stats.localCandidateType == "host")
    #expect(stats.remoteCandidateType == nil)
  }

  // Garbage (negative, infinite, wrong-typed values, dangling ids) folds to zeros, not a crash.
  @Test func badValuesFoldToNothing() {
    let entries: [StatsReportEntry] = [
      .init(
        id: "T", type: "transport",
        values: [
          "bytesSent": .number(-5), "bytesReceived": .number(.infinity), "selectedCandidatePairId": .string("nope"),
        ]),
      .init(id: "I", type: "inbound-rtp", values: ["packetsLost": .string("x"), "jitter": .number(.nan)]),
    ]
    #expect(PeerConnectionStats(folding: entries) == PeerConnectionStats())
    #expect(PeerConnectionStats(folding: []) == PeerConnectionStats())
  }
}
