import DialtoneGStreamer
import Testing

@Suite struct VideoRateControllerTests {
  private func report(_ loss: Double, rtt: Double? = 0.05) -> VideoRateController.Report {
    .init(fractionLost: loss, roundTripTime: rtt)
  }

  @Test func heavyLossCutsTheRateByHalfTheLoss() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(report(0.2)) == 540_000)
    #expect(c.update(report(0.5)) == 405_000)
  }

  // Until the first congestion a clean link grows the rate by 25 % a report, then by 8 %.
  @Test func aCleanLinkGrowsTheRateUpToTheMaximum() {
    var c = VideoRateController(start: 600_000, maximum: 2_000_000)
    #expect(c.update(report(0)) == 750_000)
    #expect(c.probing)
    #expect(c.update(report(0.2)) == 675_000)
    #expect(!c.probing)
    #expect(c.update(report(0.01)) == 729_000)
    for _ in 0..<30 { _ = c.update(report(0)) }
    #expect(c.target == 2_000_000)
  }

  @Test func moderateLossHolds() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(report(0.05)) == 600_000)
  }

  @Test func aGrowingQueueLowersTheRateBeforeLoss() {
    var c = VideoRateController(start: 600_000)
    _ = c.update(report(0, rtt: 0.05))
    #expect(c.baseRoundTripTime == 0.05)
    #expect(c.update(report(0, rtt: 0.3)) == 637_500)  // 750,000 × 0.85
    #expect(!c.probing)
    #expect(c.baseRoundTripTime == 0.05)
  }

  @Test func theRateNeverLeavesItsBoundsWhateverTheReports() {
    var c = VideoRateController(start: 5_000_000, minimum: 100_000, maximum: 1_500_000)
    #expect(c.target == 1_500_000)
    for _ in 0..<50 { _ = c.update(report(1.0)) }
    #expect(c.target == 100_000)
    #expect(c.update(report(-3, rtt: -1)) == 108_000)  // nonsense is clamped, not trusted
  }

  private func sample(_ loss: Double?, lostSoFar: Int64 = 0, nacks: UInt64, packets: UInt64)
    -> VideoRateController.Sample
  {
    .init(
      fractionLost: loss, roundTripTime: 0.05, cumulativeLost: lostSoFar, nacksReceived: nacks, packetsSent: packets)
  }

  // A report is used once: webrtcbin repeats the latest until the next one comes.
  @Test func aRepeatedReportIsUsedOnce() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(0.2, lostSoFar: 10, nacks: 0, packets: 100)) == 540_000)
    #expect(c.observe(sample(0.2, lostSoFar: 10, nacks: 0, packets: 110)) == nil)  // too few packets for NACKs
    #expect(c.observe(sample(0.2, lostSoFar: 25, nacks: 0, packets: 200)) == 486_000)  // a new report
  }

  // Between reports, the NACK rate (counted double: one NACK may name several packets) is the loss.
  @Test func nacksStandForTheLossBetweenReports() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(nil, nacks: 0, packets: 0)) == nil)
    #expect(c.observe(sample(nil, nacks: 10, packets: 100)) == 540_000)  // 20 % → down 10 %
    #expect(c.observe(sample(nil, nacks: 10, packets: 200)) == 583_200)  // no NACKs: up 8 %
    #expect(c.observe(sample(0.01, nacks: 30, packets: 300)) == 466_560)  // the worse of the two: 40 %
    // A few NACKs (late packets) between reports do not hold the rate back.
    #expect(c.observe(sample(0.01, nacks: 33, packets: 400)) == 503_884)  // 6 % → counts as clean
    // Counters that go backwards (a fresh connection) are not a rate.
    #expect(c.observe(sample(0.01, nacks: 0, packets: 10)) == nil)
  }

  // Feedback timeout, reports only: after the first report, seconds that send video with no new
  // report and no new NACKs are silence. One such second still counts "no NACKs" as clean (a
  // report is due every 0.5–1.5 s); then the rate holds, and past 4 silent samples each further
  // one cuts it by 20 %, down to the minimum.
  @Test func reportsThatStopWhileSendingLowerTheRateStepByStep() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(0, nacks: 0, packets: 100)) == 750_000)  // the first report
    #expect(c.observe(sample(0, nacks: 0, packets: 200)) == 937_500)  // repeated, no NACKs: clean
    #expect(c.silentSamples == 1)
    for packets: UInt64 in [300, 400, 500] { #expect(c.observe(sample(0, nacks: 0, packets: packets)) == nil) }
    #expect(c.silentSamples == 4)
    var expected = 937_500
    var packets: UInt64 = 500
    for _ in 0..<12 {
      expected = max(Int(Double(expected) * 0.8), 100_000)
      packets += 100
      #expect(c.observe(sample(0, nacks: 0, packets: packets)) == expected)
    }
    #expect(c.target == 100_000)
    #expect(!c.probing)
  }

  // Silence is timed only while video leaves: a sender with nothing to send holds its rate,
  // and a pause starts the count again. NACKs alone (no new report) are feedback too.
  @Test func reportSilenceCountsOnlyWhileSendingAndNacksAreFeedback() {
    var c = VideoRateController(start: 600_000, maximum: 10_000_000)
    #expect(c.observe(sample(0, nacks: 0, packets: 100)) == 750_000)
    for _ in 0..<10 { #expect(c.observe(sample(0, nacks: 0, packets: 100)) == nil) }  // nothing sent
    #expect(c.silentSamples == 0)
    // Reports stop, but a NACK or two a second still come: the receiver is there.
    var nacks: UInt64 = 0
    var packets: UInt64 = 100
    for _ in 0..<8 {
      nacks += 1
      packets += 100
      #expect(c.observe(sample(0, nacks: nacks, packets: packets)) != nil)  // 2 %: a clean second
    }
    #expect(c.silentSamples == 0)
    let before = c.target
    for _ in 0..<4 {
      packets += 100
      _ = c.observe(sample(0, nacks: nacks, packets: packets))
    }
    let held = c.target
    #expect(held == Int(Double(before) * 1.25))  // grown once, then held
    packets += 100
    #expect(c.observe(sample(0, nacks: nacks, packets: packets)) == Int(Double(held) * 0.8))
  }

  // When reports return, GCC's rules resume from the lowered rate, 8 % a report (congestion
  // was seen), not back to the rate before the silence.
  @Test func reportsThatReturnResumeFromTheLoweredRate() {
    var c = VideoRateController(start: 600_000)
    #expect(c.observe(sample(0, nacks: 0, packets: 100)) == 750_000)
    var packets: UInt64 = 100
    for _ in 0..<8 {
      packets += 100
      _ = c.observe(sample(0, nacks: 0, packets: packets))
    }
    let lowered = c.target
    #expect(lowered < 750_000)
    packets += 100
    #expect(c.observe(sample(0, lostSoFar: 1, nacks: 0, packets: packets)) == Int(Double(lowered) * 1.08))
    #expect(c.silentSamples == 0)
  }
}

@Suite struct TransportFeedbackTests {
  private func window(
    _ loss: Double, sent: Double = 300_000, received: Double = 250_000, packets: Int = 20, gradient: Double = 0
  ) -> VideoRateController.TransportFeedback {
    .init(
      fractionLost: loss, bitrateSent: sent, bitrateReceived: received, packetsSent: packets, delayGradient: gradient)
  }

  private func sample(_ transport: VideoRateController.TransportFeedback?) -> VideoRateController.Sample {
    .init(
      fractionLost: 0, roundTripTime: 0.05, cumulativeLost: 0, nacksReceived: 0, packetsSent: 0, transport: transport)
  }

  // Heavy loss: down by half the loss, and to at most 85 % of what got through.
  @Test func lossCutsTheRateToWhatTheLinkDelivered() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(window(0.6, sent: 600_000, received: 250_000)) == 212_500)
    #expect(!c.probing)
    #expect(c.update(window(0.2, received: 250_000)) == 191_250)  // 212,500 × 0.9
  }

  @Test func aGrowingQueueLowersTheRateBeforeLoss() {
    var c = VideoRateController(start: 600_000)
    #expect(c.update(window(0, received: 500_000, gradient: 0.02)) == 425_000)  // min(510,000, 425,000)
    #expect(!c.probing)
  }

  // Clean feedback grows the rate, but not past 1.5 × the received rate + 10 kbit/s; an
  // encoder far under its target (a still picture) holds the target where it is.
  @Test func cleanFeedbackGrowsUpToWhatTheLinkCarries() {
    var c = VideoRateController(start: 300_000)
    // 375,000 capped at 1.5 × 240,000 + 10,000:
    #expect(c.update(window(0, sent: 300_000, received: 240_000)) == 370_000)
    #expect(c.update(window(0.01, sent: 30_000, received: 30_000)) == 370_000)  // held, not grown
    #expect(c.update(window(0, sent: 370_000, received: 370_000)) == 462_500)
    // Few packets: their received rate is not trusted as a bound.
    #expect(c.update(window(0, sent: 462_500, received: 50_000, packets: 4)) == 578_125)
  }

  // With transport-wide feedback agreed, the receiver reports are not used: a second without
  // feedback holds the rate, and windows of fewer than 3 packets are not a measurement.
  @Test func transportFeedbackSupersedesTheReports() {
    var c = VideoRateController(start: 600_000)
    c.transportNegotiated = true
    #expect(c.observe(sample(nil)) == nil)  // a clean report would have grown it
    #expect(c.observe(sample(window(0.5, packets: 2))) == nil)
    #expect(c.observe(sample(window(0.5, received: 1_000_000))) == 450_000)
    var unagreed = VideoRateController(start: 600_000)
    #expect(unagreed.observe(sample(window(0, received: 1_000_000))) == 750_000)
    #expect(unagreed.observe(sample(nil)) == nil)  // once seen, its absence is no news
  }

  private func sending(_ transport: VideoRateController.TransportFeedback?, sent: UInt64)
    -> VideoRateController.Sample
  {
    .init(
      fractionLost: 0, roundTripTime: 0.05, cumulativeLost: 0, nacksReceived: 0, packetsSent: sent,
      transport: transport)
  }

  // Feedback timeout: transport-wide feedback that stops while video leaves holds the rate for
  // 2 samples, then cuts it by 20 % a sample down to the minimum. Before the first feedback
  // (a call's start), silence is no timeout.
  @Test func feedbackThatStopsWhileSendingLowersTheRateStepByStep() {
    var c = VideoRateController(start: 600_000)
    c.transportNegotiated = true
    for i: UInt64 in 1...5 { #expect(c.observe(sending(nil, sent: i * 100)) == nil) }  // none yet
    #expect(c.observe(sending(window(0, received: 1_000_000), sent: 600)) == 750_000)
    #expect(c.observe(sending(nil, sent: 700)) == nil)
    #expect(c.observe(sending(nil, sent: 800)) == nil)
    #expect(c.silentSamples == 2)
    var expected = 750_000
    for i: UInt64 in 1...12 {
      expected = max(Int(Double(expected) * 0.8), 100_000)
      #expect(c.observe(sending(nil, sent: 800 + i * 100)) == expected)
    }
    #expect(c.target == 100_000)
    #expect(!c.probing)
  }

  // A sender with nothing to send (muted, idle) is not missing feedback: it holds, and a pause
  // starts the grace again.
  @Test func silenceWhileNothingIsSentHolds() {
    var c = VideoRateController(start: 600_000)
    c.transportNegotiated = true
    #expect(c.observe(sending(window(0, received: 1_000_000), sent: 100)) == 750_000)
    #expect(c.observe(sending(nil, sent: 200)) == nil)
    #expect(c.observe(sending(nil, sent: 300)) == nil)
    for _ in 0..<10 { #expect(c.observe(sending(nil, sent: 300)) == nil) }  // nothing sent
    #expect(c.silentSamples == 0)
    #expect(c.target == 750_000)
    #expect(c.observe(sending(nil, sent: 400)) == nil)
    #expect(c.observe(sending(nil, sent: 500)) == nil)
    #expect(c.observe(sending(nil, sent: 600)) == 600_000)
  }

  // When feedback returns, the normal rules resume from the lowered rate: growth 8 % (congestion
  // seen), clamped by what the receiver gets, never straight back to the rate before; and a
  // window, even one too small to measure, restarts the grace.
  @Test func feedbackThatReturnsResumesFromTheLoweredRate() {
    var c = VideoRateController(start: 600_000)
    c.transportNegotiated = true
    #expect(c.observe(sending(window(0, received: 1_000_000), sent: 100)) == 750_000)
    for i: UInt64 in 1...5 { _ = c.observe(sending(nil, sent: 100 + i * 100)) }
    #expect(c.target == 384_000)  // 750,000 × 0.8³
    // Back: the receiver got 150 kbit/s of it, so no growth past 1.5 × that + 10 kbit/s.
    #expect(c.observe(sending(window(0, received: 150_000), sent: 700)) == 384_000)
    #expect(c.observe(sending(window(0, received: 300_000), sent: 800)) == 414_720)  // 8 %, not 25 %
    #expect(c.silentSamples == 0)
    #expect(c.observe(sending(nil, sent: 900)) == nil)
    #expect(c.observe(sending(window(0, packets: 2), sent: 1000)) == nil)  // too small to use, but heard
    #expect(c.observe(sending(nil, sent: 1100)) == nil)
    #expect(c.observe(sending(nil, sent: 1200)) == nil)
    #expect(c.observe(sending(nil, sent: 1300)) == 331_776)
  }

  // Short windows read ten times a second: each new one counts once, weighted by its packets.
  @Test func theTallySumsNewWindowsByTheirPackets() {
    var tally = TransportFeedbackTally()
    #expect(tally.take() == nil)
    let a = window(0.5, sent: 400_000, received: 200_000, packets: 2, gradient: 0.004)
    let b = window(0, sent: 100_000, received: 100_000, packets: 6, gradient: 0)
    tally.add(a)
    tally.add(a)  // read again before new feedback came
    tally.add(b)
    let sum = tally.take()
    #expect(sum?.packetsSent == 8)
    #expect(sum?.fractionLost == 0.125)
    #expect(sum?.bitrateSent == 175_000)
    #expect(sum?.bitrateReceived == 125_000)
    #expect(sum?.delayGradient == 0.001)
    tally.add(b)  // still the same window: nothing new
    #expect(tally.take() == nil)
  }
}
